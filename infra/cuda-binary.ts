/**
 * What a CUDA shared library (node-llama-cpp's prebuilt libggml-cuda.so) needs and holds, read
 * from the file itself so that it stays true across node-llama-cpp upgrades, and without the CUDA
 * toolkit (no cuobjdump) or binutils: the libraries it links (ELF DT_NEEDED) and, from its
 * `.nv_fatbin` section, the architectures it has machine code (cubins) for and those it carries
 * only as PTX, which the driver compiles at first load.
 *
 * The fatbin layout (a header, then entries each with a kind and an architecture) is NVIDIA's
 * undocumented but stable format, as read by the open decoders. Measured on node-llama-cpp
 * 3.22.1's linux-x64-cuda: cubins for 86, 89, 120, 121; PTX only for 75, 80, 90.
 */
import { type FileHandle, open } from 'node:fs/promises';

export interface CudaBinaryInfo {
  /** Libraries the loader must find, e.g. ['libcudart.so.13', 'libcublas.so.13', ...]. */
  needed: string[];
  /** Architectures with machine code (sm numbers, e.g. 86 for sm_86). */
  cubins: number[];
  /** Architectures present as PTX only. */
  ptxOnly: number[];
}

const FATBIN_MAGIC = 0xba55ed50;
const FATBIN_KIND_PTX = 1;
const FATBIN_KIND_CUBIN = 2;
const DT_NEEDED = 1n;

interface Section {
  name: string;
  type: number;
  offset: number;
  size: number;
  link: number;
}

async function readAt(file: FileHandle, position: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  const { bytesRead } = await file.read(buf, 0, length, position);
  if (bytesRead !== length) throw new Error(`short read at ${position}`);
  return buf;
}

async function sections(file: FileHandle): Promise<Section[]> {
  const header = await readAt(file, 0, 64);
  if (header.readUInt32BE(0) !== 0x7f454c46) throw new Error('not an ELF file');
  if (header[4] !== 2 || header[5] !== 1) throw new Error('not a 64-bit little-endian ELF file');
  const shoff = Number(header.readBigUInt64LE(0x28));
  const shentsize = header.readUInt16LE(0x3a);
  const shnum = header.readUInt16LE(0x3c);
  const shstrndx = header.readUInt16LE(0x3e);
  const table = await readAt(file, shoff, shentsize * shnum);
  const raw = Array.from({ length: shnum }, (_, i) => {
    const at = i * shentsize;
    return {
      nameOffset: table.readUInt32LE(at),
      type: table.readUInt32LE(at + 4),
      offset: Number(table.readBigUInt64LE(at + 24)),
      size: Number(table.readBigUInt64LE(at + 32)),
      link: table.readUInt32LE(at + 40),
    };
  });
  const names = await readAt(file, raw[shstrndx].offset, raw[shstrndx].size);
  return raw.map((s) => ({ ...s, name: cString(names, s.nameOffset) }));
}

function cString(buf: Buffer, at: number): string {
  const end = buf.indexOf(0, at);
  return buf.toString('latin1', at, end < 0 ? buf.length : end);
}

async function neededLibraries(file: FileHandle, all: Section[]): Promise<string[]> {
  const dynamic = all.find((s) => s.name === '.dynamic');
  if (!dynamic) return [];
  const entries = await readAt(file, dynamic.offset, dynamic.size);
  const strings = await readAt(file, all[dynamic.link].offset, all[dynamic.link].size);
  const needed: string[] = [];
  for (let at = 0; at + 16 <= entries.length; at += 16) {
    const tag = entries.readBigInt64LE(at);
    if (tag === 0n) break;
    if (tag === DT_NEEDED) needed.push(cString(strings, Number(entries.readBigUInt64LE(at + 8))));
  }
  return needed;
}

/** Walks the fatbins of `.nv_fatbin` (one per compiled .cu file) reading only their entry headers. */
async function fatbinArchitectures(file: FileHandle, section: Section): Promise<{ cubins: Set<number>; ptx: Set<number> }> {
  const cubins = new Set<number>();
  const ptx = new Set<number>();
  const end = section.offset + section.size;
  let at = section.offset;
  while (at + 16 <= end) {
    const header = await readAt(file, at, 16);
    // Fatbins are 8-byte aligned, with padding between them.
    if (header.readUInt32LE(0) !== FATBIN_MAGIC) {
      at += 8;
      continue;
    }
    const headerSize = header.readUInt16LE(6);
    const bodyEnd = at + headerSize + Number(header.readBigUInt64LE(8));
    for (let entry = at + headerSize; entry + 32 <= bodyEnd; ) {
      const e = await readAt(file, entry, 32);
      const kind = e.readUInt16LE(0);
      const entryHeaderSize = e.readUInt32LE(4);
      const size = Number(e.readBigUInt64LE(8));
      const arch = e.readUInt32LE(28);
      if (kind === FATBIN_KIND_CUBIN) cubins.add(arch);
      else if (kind === FATBIN_KIND_PTX) ptx.add(arch);
      if (entryHeaderSize === 0) break;
      entry += entryHeaderSize + size;
    }
    at = bodyEnd;
  }
  return { cubins, ptx };
}

export async function readCudaBinary(path: string): Promise<CudaBinaryInfo> {
  const file = await open(path, 'r');
  try {
    const all = await sections(file);
    const needed = await neededLibraries(file, all);
    const fatbin = all.find((s) => s.name === '.nv_fatbin');
    const { cubins, ptx } = fatbin ? await fatbinArchitectures(file, fatbin) : { cubins: new Set<number>(), ptx: new Set<number>() };
    const sorted = (s: Iterable<number>) => [...s].sort((a, b) => a - b);
    return { needed, cubins: sorted(cubins), ptxOnly: sorted([...ptx].filter((a) => !cubins.has(a))) };
  } finally {
    await file.close();
  }
}
