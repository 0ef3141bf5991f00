/**
 * A file name as Kiln keeps and serves it. Bidi controls (U+202E and its kin) reorder what a
 * reader sees, so `invoice‮fdp.exe` reads as `invoiceexe.pdf` in a download bar; control
 * characters (NUL, CR, LF, C1) have no place in a name or a header. Both go; what is left is
 * trimmed, and a name left empty becomes `file`.
 */
const UNSAFE_IN_NAMES = /[\p{Cc}\p{Bidi_Control}]/gu;

export function cleanFileName(name: string): string {
  return name.replace(UNSAFE_IN_NAMES, '').trim() || 'file';
}
