"""ELF64 relocatable objects (what `clang -c` writes) -> one flat image whose entry point is at offset 0.

`load_elf(obj, entry)` is the whole linker refimpl needs for native kernels:

  layout    the allocated sections go into one image in this order: code (SHF_EXECINSTR), read-only data (.rodata*),
            writable data (.data*), then zero-filled .bss (SHT_NOBITS) and COMMON symbols, each at its sh_addralign.
            .eh_frame (unwind tables) is left out. The image is mapped read+execute by CPUProgram, so .data/.bss are
            read-only at run time: a kernel may read them, writing them faults.
  entry     when the entry function is not at offset 0, a 16-byte header holds a jump to it (x86-64 `jmp rel32`,
            aarch64 `b imm26`), so callers always call offset 0.
  symbols   defined symbols resolve to their image offset; SHN_ABS ones to their value; undefined ones from `externs`:
            a bytes value is position-independent code appended to the image (its entry at its start), an int is an
            absolute address. Anything else is refused naming the symbol.
  relocs    RELA only (both architectures use it). With S the symbol, A the addend, P the place, B the load address:
    x86-64   PC32, PLT32 (no PLT: L = S): S+A-P, signed 32 bits.      PC64: S+A-P.
             GOTPCREL, GOTPCRELX, REX_GOTPCRELX: a `mov sym@GOTPCREL(%rip), reg` is relaxed to `lea sym(%rip), reg`
             (what linkers do for symbols they define); any other form gets a GOT entry (8 bytes at the image's end).
             64: B+S+A.   32: B+S+A, zero-extended 32 bits.   32S: B+S+A, sign-extended 32 bits.
    aarch64  ADR_PREL_PG_HI21(_NC): Page(S+A)-Page(P) >> 12 into ADRP.   ADR_PREL_LO21: S+A-P into ADR.
             ADD_ABS_LO12_NC: (S+A) & 0xfff into ADD.   LDST8/16/32/64/128_ABS_LO12_NC: the same, scaled by the access size.
             CALL26, JUMP26: (S+A-P) >> 2 into BL/B.   CONDBR19, TSTBR14: into B.cond/CBZ and TBZ.
             PREL32, PREL64: S+A-P.   ABS64: B+S+A.   ABS32: B+S+A (32 bits).
             ADR_GOT_PAGE + LD64_GOT_LO12_NC: relaxed to ADRP + ADD of the symbol itself (the LDR becomes an ADD).
            Page arithmetic assumes a page-aligned load address (CPUProgram's mmap gives one).
  base      None (the default): the image is position independent, so any relocation that needs the load address
            (64, 32, 32S, ABS64, ABS32, a GOT entry, an absolute symbol or extern) is refused; pass `base` to link
            for a known address.
Every other relocation type, REL sections, other machines, classes, byte orders and file types are refused with an
`ElfError` that says what and where.
"""
from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from refimpl.device import CPUProgram
from refimpl.errors import CompileError

EM_X86_64, EM_AARCH64 = 62, 183
SHT_SYMTAB, SHT_RELA, SHT_NOBITS, SHT_REL, SHT_NOTE = 2, 4, 8, 9, 7
SHF_WRITE, SHF_ALLOC, SHF_EXECINSTR = 1, 2, 4
SHN_UNDEF, SHN_ABS, SHN_COMMON, SHN_XINDEX = 0, 0xfff1, 0xfff2, 0xffff
STT_SECTION, STB_LOCAL = 3, 0
HEADER = 16  # bytes of the entry-jump header, when there is one

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_SYM = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")


class ElfError(ValueError):
  """The object cannot be loaded; the message names the symbol, relocation or field at fault."""


@dataclass(frozen=True)
class Section:
  index: int
  name: str
  type: int
  flags: int
  offset: int
  size: int
  link: int
  info: int
  align: int
  entsize: int


@dataclass(frozen=True)
class Symbol:
  name: str
  info: int
  shndx: int
  value: int
  size: int

  @property
  def type(self) -> int: return self.info & 0xf
  @property
  def bind(self) -> int: return self.info >> 4


@dataclass
class LoadedImage:
  """The flat image (entry at offset 0) and where things went: image offsets of sections and defined symbols."""
  image: bytes
  sections: dict[str, int] = field(default_factory=dict)
  symbols: dict[str, int] = field(default_factory=dict)
  entry_offset: int = 0        # where the entry function itself is (the header jumps there when it is not 0)
  relocations: int = 0         # how many were applied
  got_entries: int = 0


# relocation type numbers -> names, per machine (for messages and the handler tables)
X86_RELOCS = {0: "R_X86_64_NONE", 1: "R_X86_64_64", 2: "R_X86_64_PC32", 4: "R_X86_64_PLT32", 9: "R_X86_64_GOTPCREL",
              10: "R_X86_64_32", 11: "R_X86_64_32S", 24: "R_X86_64_PC64", 41: "R_X86_64_GOTPCRELX",
              42: "R_X86_64_REX_GOTPCRELX"}
A64_RELOCS = {0: "R_AARCH64_NONE", 257: "R_AARCH64_ABS64", 258: "R_AARCH64_ABS32", 260: "R_AARCH64_PREL64",
              261: "R_AARCH64_PREL32", 274: "R_AARCH64_ADR_PREL_LO21", 275: "R_AARCH64_ADR_PREL_PG_HI21",
              276: "R_AARCH64_ADR_PREL_PG_HI21_NC", 277: "R_AARCH64_ADD_ABS_LO12_NC", 278: "R_AARCH64_LDST8_ABS_LO12_NC",
              279: "R_AARCH64_TSTBR14", 280: "R_AARCH64_CONDBR19", 282: "R_AARCH64_JUMP26", 283: "R_AARCH64_CALL26",
              284: "R_AARCH64_LDST16_ABS_LO12_NC", 285: "R_AARCH64_LDST32_ABS_LO12_NC", 286: "R_AARCH64_LDST64_ABS_LO12_NC",
              299: "R_AARCH64_LDST128_ABS_LO12_NC", 311: "R_AARCH64_ADR_GOT_PAGE", 312: "R_AARCH64_LD64_GOT_LO12_NC"}
WIDE_RELOCS = frozenset({1, 24, 257, 260})  # the 8-byte ones
MACHINES = {EM_X86_64: ("x86-64", X86_RELOCS), EM_AARCH64: ("aarch64", A64_RELOCS)}


def _cstr(table: bytes, off: int) -> str:
  end = table.find(b"\0", off)
  return table[off:end if end >= 0 else len(table)].decode("utf-8", "replace")


def parse_sections(obj: bytes, who: str = "ELF") -> tuple[int, list[Section]]:
  """(e_machine, sections) of an ELF64 little-endian relocatable object; ElfError for anything else."""
  if len(obj) < _EHDR.size or obj[:4] != b"\x7fELF": raise ElfError(f"{who}: not an ELF object (bad magic {obj[:4]!r})")
  ident, e_type, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, shstrndx = _EHDR.unpack_from(obj)
  if ident[4] != 2: raise ElfError(f"{who}: ELF class {ident[4]} is not ELF64")
  if ident[5] != 1: raise ElfError(f"{who}: ELF data encoding {ident[5]} is not little-endian")
  if e_type != 1: raise ElfError(f"{who}: ELF file type {e_type} is not a relocatable object (ET_REL = 1)")
  if machine not in MACHINES: raise ElfError(f"{who}: ELF machine {machine} is not supported (x86-64 = 62, aarch64 = 183)")
  if shentsize != _SHDR.size or shnum == 0 or shoff + shnum * shentsize > len(obj):
    raise ElfError(f"{who}: malformed section header table (shoff {shoff}, {shnum} x {shentsize} bytes)")
  raw = [_SHDR.unpack_from(obj, shoff + i * shentsize) for i in range(shnum)]
  names = obj[raw[shstrndx][4]:raw[shstrndx][4] + raw[shstrndx][5]] if shstrndx < shnum else b""
  secs = [Section(i, _cstr(names, r[0]), r[1], r[2], r[4], r[5], r[6], r[7], max(r[8], 1), r[9]) for i, r in enumerate(raw)]
  for s in secs:
    if s.type != SHT_NOBITS and s.offset + s.size > len(obj): raise ElfError(f"{who}: section {s.name!r} runs past the file end")
  return machine, secs


def parse_symbols(obj: bytes, secs: list[Section]) -> list[Symbol]:
  """The symbol table (index 0 is the null symbol), or [] when there is none."""
  symtab = next((s for s in secs if s.type == SHT_SYMTAB), None)
  if symtab is None: return []
  strtab = secs[symtab.link]
  strs = obj[strtab.offset:strtab.offset + strtab.size]
  out = []
  for k in range(symtab.size // _SYM.size):
    name, info, _, shndx, value, size = _SYM.unpack_from(obj, symtab.offset + k * _SYM.size)
    out.append(Symbol(_cstr(strs, name), info, shndx, value, size))
  return out


def _kind_rank(s: Section) -> int:
  """Layout order: code, read-only data, writable data, zero-filled."""
  if s.type == SHT_NOBITS: return 3
  if s.flags & SHF_EXECINSTR: return 0
  return 2 if s.flags & SHF_WRITE else 1


def _align(n: int, a: int) -> int: return -(-n // a) * a


class _Linker:
  def __init__(self, obj: bytes, entry: str, externs: Mapping[str, int | bytes], base: int | None, who: str):
    self.obj, self.entry, self.externs, self.base, self.who = obj, entry, externs, base, who
    self.machine, self.secs = parse_sections(obj, who)
    self.arch, self.names = MACHINES[self.machine]
    self.syms = parse_symbols(obj, self.secs)
    self.placed = [s for s in self.secs if s.flags & SHF_ALLOC and s.type != SHT_NOTE and s.size > 0 and s.name != ".eh_frame"]
    self.placed.sort(key=lambda s: (_kind_rank(s), s.index))

  def layout(self, start: int) -> int:
    """Assigns image offsets from `start`: sections, COMMON symbols, extern code blobs. Returns the end."""
    self.where: dict[int, int] = {}
    pos = start
    for s in self.placed:
      pos = _align(pos, s.align)
      self.where[s.index] = pos
      pos += s.size
    self.common: dict[int, int] = {}
    for k, sym in enumerate(self.syms):
      if sym.shndx == SHN_COMMON:
        pos = _align(pos, max(sym.value, 1))
        self.common[k] = pos
        pos += sym.size
    self.blobs: dict[str, int] = {}
    for name, v in self.externs.items():
      if isinstance(v, (bytes, bytearray)) and any(s.name == name and s.shndx == SHN_UNDEF for s in self.syms):
        pos = _align(pos, 16)
        self.blobs[name] = pos
        pos += len(v)
    return pos

  def entry_offset(self) -> int:
    cands = [sym for sym in self.syms if sym.name == self.entry and sym.shndx not in (SHN_UNDEF, SHN_ABS, SHN_COMMON)]
    code = [sym for sym in cands if sym.shndx < len(self.secs) and self.secs[sym.shndx].flags & SHF_EXECINSTR]
    if not code:
      funcs = sorted({s.name for s in self.syms if s.type == 2 and s.shndx != SHN_UNDEF})
      raise ElfError(f"{self.who}: no function {self.entry!r} in the object (it defines: {', '.join(funcs) or 'no functions'})")
    sym = max(code, key=lambda s: s.bind != STB_LOCAL)
    return self.where[sym.shndx] + sym.value

  # --- symbol values: (value, absolute?) ---
  def sym_value(self, k: int, rel: str) -> tuple[int, bool]:
    """Symbol k's address: an image offset (absolute=False) or an absolute address (absolute=True)."""
    sym = self.syms[k]
    if sym.shndx == SHN_UNDEF:
      if sym.name in self.blobs: return self.blobs[sym.name], False
      v = self.externs.get(sym.name)
      if isinstance(v, int) and not isinstance(v, bool): return v, True
      raise ElfError(f"{self.who}: kernel needs external symbol {sym.name!r} which refimpl does not provide")
    if sym.shndx == SHN_ABS: return sym.value, True
    if sym.shndx == SHN_COMMON: return self.common[k], False
    if sym.shndx >= len(self.secs): raise ElfError(f"{self.who}: {rel}: symbol {sym.name!r} has section index {sym.shndx:#x}")
    if sym.shndx not in self.where:
      raise ElfError(f"{self.who}: {rel}: symbol {sym.name or self.secs[sym.shndx].name!r} is in section "
                     f"{self.secs[sym.shndx].name!r}, which is not loaded")
    return self.where[sym.shndx] + sym.value, False

  def link(self) -> LoadedImage:
    end = self.layout(0)
    start = 0
    if self.entry_offset() != 0:
      start = HEADER
      end = self.layout(start)
    self.got: dict[int, int] = {}
    got_at = _align(end, 8)
    self.got_at = got_at
    img = bytearray(got_at)
    for s in self.placed:
      if s.type != SHT_NOBITS: img[self.where[s.index]:self.where[s.index] + s.size] = self.obj[s.offset:s.offset + s.size]
    for name, at in self.blobs.items(): img[at:at + len(self.externs[name])] = self.externs[name]
    self.img = img
    count = 0
    for rs in self.secs:
      if rs.type == SHT_REL and rs.info in self.where:
        raise ElfError(f"{self.who}: section {rs.name!r} holds REL relocations (implicit addends), which are not supported")
      if rs.type != SHT_RELA or rs.info not in self.where: continue
      target = self.secs[rs.info]
      for j in range(rs.size // _RELA.size):
        r_off, info, addend = _RELA.unpack_from(self.obj, rs.offset + j * _RELA.size)
        self.apply(target, r_off, info >> 32, info & 0xffffffff, addend)
        count += 1
    got_slots = sorted(self.got.items(), key=lambda kv: kv[1])
    for k, slot in got_slots:
      v, absolute = self.sym_value(k, "GOT entry")
      img += struct.pack("<Q", v if absolute else self.need_base(f"a GOT entry for {self.syms[k].name!r}") + v)
      assert len(img) == got_at + 8 * (slot + 1)
    eo = self.entry_offset()
    if eo != 0: img[0:HEADER] = _jump(self.machine, eo)
    return LoadedImage(bytes(img), {s.name: self.where[s.index] for s in self.placed},
                       {s.name: self.where[s.shndx] + s.value for s in self.syms
                        if s.name and s.shndx in self.where and s.type != STT_SECTION}, eo, count, len(got_slots))

  def need_base(self, what: str) -> int:
    if self.base is None:
      raise ElfError(f"{self.who}: {what} needs the image's load address: the flat image is position independent "
                     f"(compile with -fPIC, keep absolute addresses out of data; or pass base=)")
    return self.base

  def apply(self, target: Section, r_off: int, k: int, rtype: int, addend: int) -> None:
    name = self.names.get(rtype, f"type {rtype}")
    where = f"{name} at {target.name}+{r_off:#x}"
    if rtype == 0: return
    if rtype not in self.names: raise ElfError(f"{self.who}: unsupported {self.arch} relocation {where}")
    if k >= len(self.syms): raise ElfError(f"{self.who}: {where}: symbol index {k} is out of range")
    if r_off + (8 if rtype in WIDE_RELOCS else 4) > target.size: raise ElfError(f"{self.who}: {where}: outside its section")
    P = self.where[target.index] + r_off
    sv, absolute = self.sym_value(k, where)
    B = self.base if self.base is not None else 0
    handler = (X86_HANDLERS if self.machine == EM_X86_64 else A64_HANDLERS)[rtype]
    handler(self, _Reloc(where, P, sv, absolute, addend, B, k))

  # --- helpers for handlers ---
  def pcrel(self, r: _Reloc) -> int:
    """S + A - P (the symbol made image-relative when it is absolute, which needs the load address)."""
    s = r.S - self.need_base(f"{r.where} to absolute symbol {self.syms[r.k].name!r}") if r.absolute else r.S
    return s + r.A - r.P
  def absolute(self, r: _Reloc) -> int:
    """B + S + A: the symbol's absolute address plus the addend."""
    return r.S + r.A if r.absolute else self.need_base(r.where) + r.S + r.A
  def put(self, r: _Reloc, fmt: str, v: int, lo: int, hi: int) -> None:
    if not lo <= v <= hi: raise ElfError(f"{self.who}: {r.where}: value {v:#x} does not fit [{lo:#x}, {hi:#x}]")
    struct.pack_into(fmt, self.img, r.P, v & ((1 << (8 * struct.calcsize(fmt))) - 1) if fmt[-1].isupper() else v)
  def insn(self, r: _Reloc) -> int: return struct.unpack_from("<I", self.img, r.P)[0]
  def set_insn(self, r: _Reloc, v: int) -> None: struct.pack_into("<I", self.img, r.P, v & 0xffffffff)
  def got_slot(self, k: int) -> int:
    if k not in self.got: self.got[k] = len(self.got)
    return self.got_at + 8 * self.got[k]


@dataclass(frozen=True)
class _Reloc:
  where: str
  P: int          # image offset of the place
  S: int          # symbol: image offset, or absolute address when `absolute`
  absolute: bool
  A: int
  B: int
  k: int          # symbol index


I32, U32 = (-(1 << 31), (1 << 31) - 1), (0, (1 << 32) - 1)
I64 = (-(1 << 63), (1 << 64) - 1)

def _x86_gotpcrel(L: _Linker, r: _Reloc) -> None:
  # `mov sym@GOTPCREL(%rip), %reg` (opcode 0x8b, ModRM mod=00 rm=101) becomes `lea sym(%rip), %reg` (0x8d)
  if r.P >= 2 and L.img[r.P - 2] == 0x8b and (L.img[r.P - 1] & 0xc7) == 0x05 and not r.absolute:
    L.img[r.P - 2] = 0x8d
    L.put(r, "<i", L.pcrel(r), *I32)
    return
  L.put(r, "<i", L.got_slot(r.k) + r.A - r.P, *I32)

X86_HANDLERS: dict[int, Callable[[_Linker, _Reloc], None]] = {
  1: lambda L, r: L.put(r, "<Q", L.absolute(r), *I64),
  2: lambda L, r: L.put(r, "<i", L.pcrel(r), *I32),
  4: lambda L, r: L.put(r, "<i", L.pcrel(r), *I32),
  9: _x86_gotpcrel, 41: _x86_gotpcrel, 42: _x86_gotpcrel,
  10: lambda L, r: L.put(r, "<I", L.absolute(r), *U32),
  11: lambda L, r: L.put(r, "<i", L.absolute(r), *I32),
  24: lambda L, r: L.put(r, "<q", L.pcrel(r), -(1 << 63), (1 << 63) - 1),
}

def _page(x: int) -> int: return x & ~0xfff

def _a64_adr(L: _Linker, r: _Reloc, imm: int, bits: int = 21, check: bool = True) -> None:
  """imm into an ADR/ADRP: immlo = bits 29-30, immhi = bits 5-23."""
  if check and not -(1 << (bits - 1)) <= imm < (1 << (bits - 1)):
    raise ElfError(f"{L.who}: {r.where}: offset {imm:#x} does not fit ADR(P)'s 21 bits")
  imm &= (1 << 21) - 1
  L.set_insn(r, (L.insn(r) & ~((3 << 29) | (0x7ffff << 5))) | ((imm & 3) << 29) | ((imm >> 2) << 5))

def _a64_adrp(L: _Linker, r: _Reloc, check: bool = True) -> None:
  s = L.pcrel(r) + r.P  # S + A, image-relative
  _a64_adr(L, r, (_page(r.B + s) - _page(r.B + r.P)) >> 12, check=check)

def _a64_lo12(L: _Linker, r: _Reloc, scale: int) -> None:
  """(S + A) & 0xfff, divided by the access size, into the imm12 field (bits 10-21) of ADD / LDR / STR."""
  lo = (r.B + L.pcrel(r) + r.P) & 0xfff
  if lo % (1 << scale): raise ElfError(f"{L.who}: {r.where}: address {lo:#x} is not aligned to the {1 << scale}-byte access")
  L.set_insn(r, (L.insn(r) & ~(0xfff << 10)) | ((lo >> scale) << 10))

def _a64_branch(L: _Linker, r: _Reloc, bits: int, shift: int) -> None:
  """(S + A - P) >> 2 into a `bits`-wide field at bit `shift`."""
  off = L.pcrel(r)
  if off % 4 or not -(1 << (bits + 1)) <= off < (1 << (bits + 1)):
    raise ElfError(f"{L.who}: {r.where}: branch offset {off:#x} is misaligned or beyond +-{1 << (bits + 1):#x}")
  mask = ((1 << bits) - 1) << shift
  L.set_insn(r, (L.insn(r) & ~mask) | (((off >> 2) << shift) & mask))

def _a64_got_lo12(L: _Linker, r: _Reloc) -> None:
  """`ldr xT, [xN, #:got_lo12:sym]` (64-bit LDR, unsigned offset) becomes `add xT, xN, #:lo12:sym`."""
  insn = L.insn(r)
  if insn & 0xffc00000 != 0xf9400000: raise ElfError(f"{L.who}: {r.where}: expected a 64-bit LDR, found {insn:#010x}")
  L.set_insn(r, 0x91000000 | (insn & 0x3ff))
  _a64_lo12(L, r, 0)

A64_HANDLERS: dict[int, Callable[[_Linker, _Reloc], None]] = {
  257: lambda L, r: L.put(r, "<Q", L.absolute(r), *I64),
  258: lambda L, r: L.put(r, "<I", L.absolute(r), -(1 << 31), (1 << 32) - 1),
  260: lambda L, r: L.put(r, "<q", L.pcrel(r), -(1 << 63), (1 << 63) - 1),
  261: lambda L, r: L.put(r, "<I", L.pcrel(r), -(1 << 31), (1 << 32) - 1),
  274: lambda L, r: _a64_adr(L, r, L.pcrel(r)),
  275: _a64_adrp, 276: lambda L, r: _a64_adrp(L, r, check=False), 311: _a64_adrp,
  277: lambda L, r: _a64_lo12(L, r, 0), 278: lambda L, r: _a64_lo12(L, r, 0), 284: lambda L, r: _a64_lo12(L, r, 1),
  285: lambda L, r: _a64_lo12(L, r, 2), 286: lambda L, r: _a64_lo12(L, r, 3), 299: lambda L, r: _a64_lo12(L, r, 4),
  279: lambda L, r: _a64_branch(L, r, 14, 5), 280: lambda L, r: _a64_branch(L, r, 19, 5),
  282: lambda L, r: _a64_branch(L, r, 26, 0), 283: lambda L, r: _a64_branch(L, r, 26, 0),
  312: _a64_got_lo12,
}
assert set(X86_HANDLERS) | {0} == set(X86_RELOCS) and set(A64_HANDLERS) | {0} == set(A64_RELOCS)


def _jump(machine: int, target: int) -> bytes:
  """The HEADER bytes at offset 0: a jump to `target`, padded with traps (int3) / zeros."""
  if machine == EM_X86_64: return (b"\xe9" + struct.pack("<i", target - 5)).ljust(HEADER, b"\xcc")
  return struct.pack("<I", 0x14000000 | ((target >> 2) & 0x3ffffff)).ljust(HEADER, b"\0")


def load_elf(obj: bytes, entry: str, externs: Mapping[str, int | bytes] | None = None, base: int | None = None,
             who: str = "ELF") -> LoadedImage:
  """Links the relocatable object `obj` into a flat image that starts executing `entry` at offset 0 (module docstring).
  `externs` resolves undefined symbols (bytes: code appended to the image; int: an absolute address, needs `base`);
  `who` prefixes every error message (e.g. "CLANG")."""
  return _Linker(bytes(obj), entry, externs or {}, base, who).link()


class ElfProgram(CPUProgram):
  """A relocatable ELF object linked by `load_elf` (entry = the kernel's name) and mapped W^X by CPUProgram; a loader
  refusal (an unresolved symbol, an unknown relocation) is a CompileError naming the backend `who`."""
  who = "ELF"
  def __init__(self, name: str, lib: bytes):
    try: image = load_elf(lib, name, who=self.who).image
    except ElfError as e: raise CompileError(str(e)) from e
    super().__init__(name, image)
