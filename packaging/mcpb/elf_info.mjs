// elf_info.mjs — what a built tmcra-mcp needs to run, read from its own ELF headers rather than
// from the machine that packs it: the OS and CPU it was linked for, its dynamic loader, the
// shared libraries it names (DT_NEEDED), the highest GLIBC_x.y and GLIBCXX_x.y.z symbol versions
// it references (the version-needs table, .gnu.version_r, found through the dynamic section,
// so a stripped binary reads the same), and whether it can dlopen libcurl for a remote memory.
//
//   import { inspectBinary } from './elf_info.mjs';
//   node elf_info.mjs <binary>        # prints the result as JSON
//
// Only 64-bit little-endian ELF (x86-64, AArch64) for Linux is understood; anything else is an
// error, since the bundle would otherwise claim a platform it was not checked for.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// e_machine values (ELF gABI) and the names each world uses for the CPU.
const MACHINES = new Map([
  [62, { cpu: 'x86_64', nodeArch: 'x64', debianArch: 'amd64' }],
  [183, { cpu: 'aarch64', nodeArch: 'arm64', debianArch: 'arm64' }],
]);

// The Debian 12 (bookworm) binary package that ships each shared object tmcra-mcp links or
// loads. A soname missing here stops the packing: the manifest would otherwise leave out a
// library the user must install. (Checked with `dpkg -S` on Debian 12: tests/peer/mcpb_bundle.mjs.)
export const DEBIAN12_PACKAGES = new Map([
  ['libc.so.6', 'libc6'],
  ['libm.so.6', 'libc6'],
  ['libpthread.so.0', 'libc6'],
  ['libdl.so.2', 'libc6'],
  ['librt.so.1', 'libc6'],
  ['ld-linux-x86-64.so.2', 'libc6'],
  ['ld-linux-aarch64.so.1', 'libc6'],
  ['libgcc_s.so.1', 'libgcc-s1'],
  ['libstdc++.so.6', 'libstdc++6'],
  ['libsqlite3.so.0', 'libsqlite3-0'],
  ['libstemmer.so.0d', 'libstemmer0d'],
  ['libspdlog.so.1.10', 'libspdlog1.10'],
  ['libfmt.so.9', 'libfmt9'],
  ['libcurl.so.4', 'libcurl4'],
  // The sanitizer runtimes of gcc 12, for a bundle packed from a test build.
  ['libasan.so.8', 'libasan8'],
  ['libtsan.so.2', 'libtsan2'],
  ['libubsan.so.1', 'libubsan1'],
]);

// What src/config/libcurl.cc passes to dlopen (kLibcurlSoname) for a remote memory.
const LIBCURL_SONAME = 'libcurl.so.4';

const PT_LOAD = 1;
const PT_DYNAMIC = 2;
const PT_INTERP = 3;
const PT_NOTE = 4;
const DT_NULL = 0n;
const DT_NEEDED = 1n;
const DT_STRTAB = 5n;
const DT_VERNEED = 0x6ffffffen;
const DT_VERNEEDNUM = 0x6fffffffn;
const NT_GNU_ABI_TAG = 1;
const ELFOSABI_GNU = 3;  // a.k.a. ELFOSABI_LINUX

function compareVersions(a, b) {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

function highest(versions, prefix) {
  const re = new RegExp(`^${prefix}_(\\d+(?:\\.\\d+)+)$`);
  let best = null;
  for (const v of versions) {
    const m = re.exec(v);
    if (m && (best === null || compareVersions(m[1], best) > 0)) best = m[1];
  }
  return best;
}

export function inspectBinary(file) {
  const buf = fs.readFileSync(file);
  const fail = (why) => { throw new Error(`${file}: ${why}`); };
  if (buf.length < 64 || buf.readUInt32BE(0) !== 0x7f454c46) fail('not an ELF file (a Linux binary is needed)');
  if (buf[4] !== 2) fail('not a 64-bit ELF file');
  if (buf[5] !== 1) fail('not a little-endian ELF file');
  const osabi = buf[7];
  const machine = MACHINES.get(buf.readUInt16LE(18));
  if (!machine) fail(`ELF machine ${buf.readUInt16LE(18)} is neither x86-64 nor AArch64`);

  const phoff = Number(buf.readBigUInt64LE(32));
  const phentsize = buf.readUInt16LE(54);
  const phnum = buf.readUInt16LE(56);
  const segments = [];
  for (let i = 0; i < phnum; i++) {
    const at = phoff + i * phentsize;
    segments.push({
      type: buf.readUInt32LE(at),
      offset: Number(buf.readBigUInt64LE(at + 8)),
      vaddr: Number(buf.readBigUInt64LE(at + 16)),
      filesz: Number(buf.readBigUInt64LE(at + 32)),
      align: Number(buf.readBigUInt64LE(at + 48)),
    });
  }
  const cString = (at) => {
    const end = buf.indexOf(0, at);
    if (end < 0) fail('unterminated string');
    return buf.toString('latin1', at, end);
  };
  const fileOffset = (vaddr) => {
    const seg = segments.find((s) => s.type === PT_LOAD && vaddr >= s.vaddr && vaddr < s.vaddr + s.filesz);
    if (!seg) fail(`address 0x${vaddr.toString(16)} is in no loaded segment`);
    return vaddr - seg.vaddr + seg.offset;
  };

  const interpSeg = segments.find((s) => s.type === PT_INTERP);
  const interpreter = interpSeg ? cString(interpSeg.offset) : null;

  // The GNU ABI tag note says which kernel the C library was built for (0 = Linux).
  let abiTagOs = null;
  for (const seg of segments.filter((s) => s.type === PT_NOTE)) {
    const align = seg.align === 8 ? 8 : 4;
    const up = (n) => Math.ceil(n / align) * align;
    for (let at = seg.offset; at + 12 <= seg.offset + seg.filesz;) {
      const namesz = buf.readUInt32LE(at);
      const descsz = buf.readUInt32LE(at + 4);
      const type = buf.readUInt32LE(at + 8);
      const name = buf.toString('latin1', at + 12, at + 12 + Math.max(0, namesz - 1));
      const desc = at + 12 + up(namesz);
      if (name === 'GNU' && type === NT_GNU_ABI_TAG && descsz >= 4) abiTagOs = buf.readUInt32LE(desc);
      at = desc + up(descsz);
    }
  }
  const linux = osabi === ELFOSABI_GNU || abiTagOs === 0 ||
    (interpreter !== null && path.basename(interpreter).startsWith('ld-linux'));
  if (!linux) fail('the ELF file does not say it is for Linux (OS/ABI, ABI tag, loader)');

  const dynSeg = segments.find((s) => s.type === PT_DYNAMIC);
  if (!dynSeg) fail('no dynamic section: a static binary is not what pack.sh expects');
  const dyn = [];
  for (let at = dynSeg.offset; at + 16 <= dynSeg.offset + dynSeg.filesz; at += 16) {
    const tag = buf.readBigInt64LE(at);
    if (tag === DT_NULL) break;
    dyn.push({ tag, val: buf.readBigUInt64LE(at + 8) });
  }
  const one = (tag) => dyn.find((d) => d.tag === tag)?.val;
  const strtabVaddr = one(DT_STRTAB);
  if (strtabVaddr === undefined) fail('no DT_STRTAB');
  const strtab = fileOffset(Number(strtabVaddr));
  const needed = dyn.filter((d) => d.tag === DT_NEEDED).map((d) => cString(strtab + Number(d.val)));

  const versions = {};  // soname -> [version names it needs, e.g. GLIBC_2.34]
  const verneed = one(DT_VERNEED);
  const count = Number(one(DT_VERNEEDNUM) ?? 0n);
  if (verneed !== undefined) {
    let at = fileOffset(Number(verneed));
    for (let i = 0; i < count; i++) {
      const cnt = buf.readUInt16LE(at + 2);
      const lib = cString(strtab + buf.readUInt32LE(at + 4));
      const names = (versions[lib] ??= []);
      let aux = at + buf.readUInt32LE(at + 8);
      for (let j = 0; j < cnt; j++) {
        names.push(cString(strtab + buf.readUInt32LE(aux + 8)));
        const next = buf.readUInt32LE(aux + 12);
        if (next === 0) break;
        aux += next;
      }
      const next = buf.readUInt32LE(at + 12);
      if (next === 0) break;
      at += next;
    }
  }
  const all = Object.values(versions).flat();

  return {
    platform: 'linux',
    ...machine,
    interpreter,
    needed,
    versions,
    glibc: highest(all, 'GLIBC'),
    glibcxx: highest(all, 'GLIBCXX'),
    // dlopen'ed, so in no ELF table: its soname string in the binary is the sign.
    loadsLibcurl: buf.includes(Buffer.from(`${LIBCURL_SONAME}\0`, 'latin1')),
    libcurlSoname: LIBCURL_SONAME,
  };
}

// The Debian 12 package of a soname, or an error naming the table to extend.
export function debianPackage(soname) {
  const pkg = DEBIAN12_PACKAGES.get(soname);
  if (!pkg) {
    throw new Error(`the binary needs ${soname}, which packaging/mcpb/elf_info.mjs does not map to a ` +
      'Debian 12 package: add it to DEBIAN12_PACKAGES');
  }
  return pkg;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const file = process.argv[2];
  if (!file) {
    console.error('usage: node elf_info.mjs <binary>');
    process.exit(2);
  }
  process.stdout.write(`${JSON.stringify(inspectBinary(file), null, 2)}\n`);
}
