"""README.pdf's pages as a reader sees them: every piece of text a page draws, with what decides
whether it can be seen (render mode, size, colour and what lies under it, opacity, clip, place
on the page, whether something is drawn over it later).

A small interpreter of PDF content streams (ISO 32000-1, section 8 and 9), written for the
documentation check (:mod:`.pdf_structure`). It understands what WeasyPrint writes for the
datasheet (text in Type0 fonts with Identity-H encoding and a ToUnicode map, paths, clips,
form XObjects for the SVG charts, marked content) and reports anything else as a problem instead
of guessing: an operator it does not know, an inline or image XObject, a font of another kind.
Positions are approximate where exactness is not needed (the extent of a path is its points'
bounding box; a clip is the bounding box of its path), which errs towards "visible" for paths
and never for text: a run's extent uses the font's glyph widths.

Only pypdf (the object model, stream filters), numpy (the over/under tests of a page's text
against its drawings) and fontTools (each font's embedded program, against which its ToUnicode
map is checked: :func:`check_program`) are used.
"""
from __future__ import annotations

import math
import re
import struct
from dataclasses import dataclass, field

__all__ = ["Run", "Paint", "PageScan", "ContentError", "scan_page", "new_budget", "MAX_TOKENS", "MAX_DEPTH",
           "MAX_TEXT_CHARS"]

MAX_TOKENS = 4_000_000      # content-stream tokens in the whole PDF (the demo datasheet: ~250,000)
MAX_DEPTH = 8               # nested form XObjects (a datasheet: 1)
MAX_CMAP_CODES = 70_000     # entries of one ToUnicode map (2-byte codes: at most 65,536)
MAX_ITEMS = 50_000          # texts or drawings on one page (a datasheet page: some hundreds)
MAX_TEXT_CHARS = 8_000_000  # characters of text in the whole PDF (a datasheet: about 50,000)
MAX_LITERAL = 1_000_000     # bytes of one literal string (the renderer writes hex strings only)
MAX_KERN = 1000             # a TJ adjustment, thousandths of an em (the datasheet's largest: 170)

_WS = rb"\x00\t\n\x0c\r "
_DELIM = rb"()<>\[\]{}/%"
_TOKEN = re.compile(
    rb"(?P<ws>[" + _WS + rb"]+|%[^\r\n]*)"
    rb"|(?P<dopen><<)|(?P<dclose>>>)"
    rb"|(?P<hex><[0-9A-Fa-f" + _WS + rb"]*>)"
    rb"|(?P<name>/[^" + _WS + _DELIM + rb"]*)"
    rb"|(?P<num>[+-]?(?:\d+\.?\d*|\.\d+)(?![^" + _WS + _DELIM + rb"]))"
    rb"|(?P<aopen>\[)|(?P<aclose>\])"
    rb"|(?P<lit>\()"
    rb"|(?P<op>[^" + _WS + _DELIM + rb"]+)")

# Operators the interpreter knows; everything else in a content stream is a problem.
_PATH = {b"m", b"l", b"c", b"v", b"y", b"h", b"re"}
_PAINT_FILL = {b"f", b"F", b"f*", b"B", b"B*", b"b", b"b*"}
_PAINT_STROKE = {b"S", b"s"}
_HARMLESS = {b"w", b"J", b"j", b"M", b"d", b"ri", b"i", b"RG", b"G", b"K", b"CS", b"SC", b"SCN",
             b"Tc", b"Tw", b"TL", b"MP", b"DP"}


class ContentError(Exception):
    """A page cannot be read as the renderer writes pages (the message says why)."""


@dataclass
class Run:
    """One text-showing operator: its text, where and how it is drawn (page coordinates)."""

    seq: int
    text: str
    artifact: bool
    xobject: int | None          # the form XObject drawing it (its object number), None: the page
    figure: int | None           # the /Figure marked-content sequence holding it (numbered
    # through the document from 0), None: not in a figure
    box: tuple[float, float, float, float]
    size: float                  # the glyphs' height on the page, in points
    colour: tuple | None         # RGB in 0..1; None: not an RGB or grey fill
    alpha: float
    mode: int
    clip: tuple[float, float, float, float] | None
    background: tuple = (1.0, 1.0, 1.0)
    covered: bool = False


@dataclass
class Paint:
    """A filled (or thickly stroked) shape: its bounding box and colour."""

    seq: int
    box: tuple[float, float, float, float]
    colour: tuple | None
    alpha: float
    parts: list = field(default_factory=list)   # the boxes of its subpaths (a point is under
    # the shape when it lies in an odd number of them: a ring's hole is not under it)


@dataclass
class PageScan:
    runs: list[Run] = field(default_factory=list)
    paints: list[Paint] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    xobjects: list[int] = field(default_factory=list)   # form XObjects drawn, in order


# ---------------------------------------------------------------------------- tokens

def _literal(data: bytes, i: int) -> tuple[bytes, int]:
    """A literal string starting after its "(" at ``i``: its bytes and the index after ")"."""
    out, depth, n = bytearray(), 1, min(len(data), i + MAX_LITERAL)
    while i < n:
        ch = data[i]
        if ch == 0x5C and i + 1 < n:           # backslash
            nxt = data[i + 1]
            esc = {0x6E: 10, 0x72: 13, 0x74: 9, 0x62: 8, 0x66: 12}.get(nxt)
            if esc is not None:
                out.append(esc)
                i += 2
            elif 0x30 <= nxt <= 0x37:
                m = re.match(rb"[0-7]{1,3}", data[i + 1:i + 4])
                out.append(int(m.group(0), 8) & 0xFF)
                i += 1 + len(m.group(0))
            elif nxt in (0x0A, 0x0D):
                i += 2
            else:
                out.append(nxt)
                i += 2
            continue
        if ch == 0x28:
            depth += 1
        elif ch == 0x29:
            depth -= 1
            if depth == 0:
                return bytes(out), i + 1
        out.append(ch)
        i += 1
    if n < len(data):
        raise ContentError(f"a string longer than {MAX_LITERAL:,} bytes")
    raise ContentError("a string is not closed")


def _name(raw: bytes) -> str:
    return "/" + re.sub(rb"#([0-9A-Fa-f]{2})", lambda m: bytes([int(m.group(1), 16)]), raw[1:]).decode("latin-1")


class _Tokens:
    """Operands and operators of a content stream, one operator (with its operands) at a time."""

    def __init__(self, data: bytes, budget: list[int]):
        self.data, self.pos, self.budget = data, 0, budget

    def _value(self, m) -> object:
        kind = m.lastgroup
        raw = m.group(kind)
        if kind == "num":
            return float(raw)
        if kind == "name":
            return _name(raw)
        if kind == "hex":
            digits = re.sub(rb"[" + _WS + rb"]", b"", raw[1:-1])
            return bytes.fromhex((digits + b"0" if len(digits) % 2 else digits).decode("ascii"))
        if kind == "lit":
            s, self.pos = _literal(self.data, self.pos)
            return s
        if kind == "aopen":
            return self._until("aclose", list)
        if kind == "dopen":
            items = self._until("dclose", list)
            return {items[k]: items[k + 1] for k in range(0, len(items) - 1, 2) if isinstance(items[k], str)}
        raise ContentError(f"unexpected {raw[:20]!r} in a content stream")

    def _next(self):
        m = _TOKEN.match(self.data, self.pos)
        if m is None:
            raise ContentError(f"unreadable bytes at offset {self.pos} of a content stream")
        self.pos = m.end()
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise ContentError(f"more than {MAX_TOKENS:,} content-stream tokens (a datasheet has "
                               "some hundred thousand)")
        return m

    def _until(self, closing: str, kind):
        items = []
        while self.pos < len(self.data):
            m = self._next()
            if m.lastgroup == "ws":
                continue
            if m.lastgroup == closing:
                return items
            if m.lastgroup == "op":
                items.append(m.group("op").decode("latin-1"))   # true/false/null inside arrays
                continue
            items.append(self._value(m))
        raise ContentError("an array or dictionary is not closed")

    def __iter__(self):
        operands: list = []
        while self.pos < len(self.data):
            m = self._next()
            kind = m.lastgroup
            if kind == "ws":
                continue
            if kind == "op":
                op = m.group("op")
                if op in (b"true", b"false", b"null"):
                    operands.append(op.decode())
                    continue
                yield op, operands
                operands = []
            else:
                operands.append(self._value(m))


# ---------------------------------------------------------------------------- geometry

def _mul(a, b):
    """The product a x b of two PDF matrices [a b c d e f] (a applied first)."""
    return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
            a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3],
            a[4] * b[0] + a[5] * b[2] + b[4], a[4] * b[1] + a[5] * b[3] + b[5])


def _apply(m, x, y):
    return x * m[0] + y * m[2] + m[4], x * m[1] + y * m[3] + m[5]


def _box(points):
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    return (min(xs), min(ys), max(xs), max(ys))


def _intersect(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return (max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3]))


def _nums(operands, n: int) -> list[float]:
    if len(operands) < n or not all(isinstance(v, float) for v in operands[-n:]):
        raise ContentError(f"an operator with {len(operands)} operand(s) where {n} number(s) are due")
    vals = operands[-n:]
    if not all(math.isfinite(v) for v in vals):
        raise ContentError("a number that is not finite")
    return vals


# ---------------------------------------------------------------------------- fonts

@dataclass
class _Font:
    to_unicode: dict[int, str]
    widths: dict[int, float]
    default_width: float
    problem: str | None = None      # its ToUnicode map and its program disagree (check_program)


def _cmap(data: bytes) -> dict[int, str]:
    """A ToUnicode CMap's bfchar and bfrange entries: code -> text."""
    out: dict[int, str] = {}
    toks = list(_Tokens(data, [MAX_TOKENS, 0]))    # (op, operands)
    for op, operands in toks:
        if op == b"endbfchar":
            for k in range(0, len(operands) - 1, 2):
                src, dst = operands[k], operands[k + 1]
                if isinstance(src, bytes) and isinstance(dst, bytes):
                    out[int.from_bytes(src, "big")] = dst.decode("utf-16-be", "replace")
        elif op == b"endbfrange":
            for k in range(0, len(operands) - 2, 3):
                lo, hi, dst = operands[k:k + 3]
                if not (isinstance(lo, bytes) and isinstance(hi, bytes)):
                    continue
                a, b = int.from_bytes(lo, "big"), int.from_bytes(hi, "big")
                if b - a + 1 + len(out) > MAX_CMAP_CODES:
                    raise ContentError("a ToUnicode map with too many codes")
                for j, code in enumerate(range(a, b + 1)):
                    if isinstance(dst, bytes):
                        base = int.from_bytes(dst, "big") + j
                        out[code] = base.to_bytes(len(dst), "big", signed=False).decode("utf-16-be", "replace") \
                            if base < 256 ** len(dst) else "\ufffd"
                    elif isinstance(dst, list) and j < len(dst) and isinstance(dst[j], bytes):
                        out[code] = dst[j].decode("utf-16-be", "replace")
        if len(out) > MAX_CMAP_CODES:
            raise ContentError("a ToUnicode map with too many codes")
    return out


def _widths(cid_font) -> dict[int, float]:
    """The /W array of a CIDFont: cid -> width (thousandths of the font size)."""
    out: dict[int, float] = {}
    w = cid_font.get("/W")
    w = w.get_object() if w is not None else []
    items = list(w) if isinstance(w, list) else []
    k = 0
    while k < len(items) - 1:
        first = items[k]
        nxt = items[k + 1].get_object() if hasattr(items[k + 1], "get_object") else items[k + 1]
        if isinstance(nxt, list):
            for j, width in enumerate(nxt):
                out[int(first) + j] = float(width)
            k += 2
        elif k + 2 < len(items):
            a, b, width = int(first), int(nxt), float(items[k + 2])
            if b - a > MAX_CMAP_CODES:
                raise ContentError("a font's width table is too long")
            for cid in range(a, b + 1):
                out[cid] = width
            k += 3
        else:
            break
        if len(out) > MAX_CMAP_CODES:
            raise ContentError("a font's width table is too long")
    return out


def load_font(font_dict) -> _Font:
    """A Type0 font with Identity-H encoding and a ToUnicode map (what the renderer embeds);
    ContentError for anything else. A map that is not the embedded program's (:func:`check_program`)
    is the font's ``problem``, reported once by the caller; its text is still read."""
    subtype, encoding = font_dict.get("/Subtype"), font_dict.get("/Encoding")
    if subtype != "/Type0" or encoding != "/Identity-H":
        raise ContentError(f"a font of type {subtype} with encoding {encoding} (the renderer embeds "
                           "Type0 fonts with Identity-H encoding only)")
    if "/ToUnicode" not in font_dict:
        raise ContentError("a font without a ToUnicode map (its text cannot be read)")
    descendants = font_dict.get("/DescendantFonts")
    descendants = descendants.get_object() if descendants is not None else None
    if not isinstance(descendants, list) or len(descendants) != 1:
        raise ContentError("a Type0 font without exactly one descendant font")
    cid = descendants[0].get_object()
    dw = cid.get("/DW", 1000)
    to_unicode = _cmap(font_dict["/ToUnicode"].get_object().get_data())
    try:
        check_program(cid, to_unicode)
        problem = None
    except ContentError as e:   # reported once (pdf_structure.check_pdf); its text is still read and compared
        problem = f"the font {_cut(str(font_dict.get('/BaseFont', '?')))}: {e}"
    return _Font(to_unicode, _widths(cid), float(dw), problem)


# ---------------------------------------------------------------------------- the font program

def _program(cid_font):
    """The embedded font program (an sfnt: TrueType, or OpenType in /FontFile3) as a fontTools
    font, its glyphs indexed by CID (/CIDToGIDMap /Identity); ContentError otherwise."""
    import io as _io

    from fontTools.ttLib import TTFont, TTLibError

    gid_map = cid_font.get("/CIDToGIDMap", "/Identity")
    if gid_map != "/Identity":
        raise ContentError("a font whose glyphs are not indexed by their codes (/CIDToGIDMap is not "
                           "/Identity; the renderer writes /Identity)")
    descriptor = cid_font.get("/FontDescriptor")
    descriptor = descriptor.get_object() if descriptor is not None else {}
    stream = descriptor.get("/FontFile2")
    if stream is None and descriptor.get("/FontFile3") is not None:
        candidate = descriptor["/FontFile3"].get_object()
        stream = candidate if candidate.get("/Subtype") == "/OpenType" else None
    if stream is None:
        raise ContentError("a font without an embedded TrueType or OpenType program (the renderer embeds "
                           "one; without it the text a glyph shows cannot be told)")
    try:
        font = TTFont(_io.BytesIO(stream.get_object().get_data()), lazy=True)
        cmap = font.getBestCmap() or {}
        return font, cmap
    except (TTLibError, KeyError, ValueError, TypeError, AssertionError, IndexError, struct.error) as e:
        raise ContentError(f"a font program that cannot be read ({type(e).__name__})") from None


def check_program(cid_font, to_unicode: dict[int, str]) -> None:
    """The ToUnicode map tells what each glyph shows, as the font program draws it: the text of
    every code is a character the program's own character map gives that glyph (or, for a
    ligature such as "ffi", that character's compatibility form), and a glyph whose text is not
    blank has an outline. A map that lies (a space glyph read as " not ", a "0" read as "9")
    or a glyph drawn empty fails, naming the code."""
    import unicodedata

    font, cmap = _program(cid_font)
    order = font.getGlyphOrder()
    shows: dict[int, set[str]] = {}
    for codepoint, name in cmap.items():
        try:
            shows.setdefault(font.getGlyphID(name), set()).add(chr(codepoint))
        except (KeyError, ValueError):
            continue
    glyphs = font.getGlyphSet()
    for code, text in sorted(to_unicode.items()):
        chars = shows.get(code, set())
        if text not in chars and text not in {unicodedata.normalize("NFKC", c) for c in chars}:
            drawn = ", ".join(repr(c) for c in sorted(chars)) or "no character"
            raise ContentError(f"a font whose ToUnicode map reads glyph {code} as {_cut(text)!r}, but "
                               f"its program's character map gives that glyph {_cut(drawn, 60)} (the text "
                               "read is not the text shown)")
        if text.strip() and not _has_outline(glyphs, order, code):
            raise ContentError(f"a font whose glyph {code} ({_cut(text)!r}) draws nothing (text that "
                               "cannot be seen)")


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _has_outline(glyphs, order: list, code: int) -> bool:
    from fontTools.pens.boundsPen import BoundsPen

    if code >= len(order):
        return False
    pen = BoundsPen(glyphs)
    try:
        glyphs[order[code]].draw(pen)
    except Exception:  # noqa: BLE001 - a broken glyph: treated as drawing nothing
        return False
    if pen.bounds is None:
        return False
    x0, y0, x1, y1 = pen.bounds
    return x1 > x0 or y1 > y0


# ---------------------------------------------------------------------------- the interpreter

@dataclass
class _GState:
    ctm: tuple = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    fill: tuple | None = (0.0, 0.0, 0.0)
    fill_space: str = "/DeviceGray"
    alpha: float = 1.0
    line_width: float = 1.0
    clip: tuple | None = None
    font: _Font | None = None
    size: float = 0.0
    mode: int = 0
    leading: float = 0.0
    char_space: float = 0.0
    word_space: float = 0.0
    scale: float = 100.0
    rise: float = 0.0

    def copy(self) -> "_GState":
        return _GState(**self.__dict__)


_ALLOWED_GS = {"/Type", "/ca", "/CA", "/LW", "/LC", "/LJ", "/ML", "/D", "/RI", "/FL", "/SA", "/SM"}


class _Interpreter:
    """Runs the content streams of one page (and the form XObjects it draws)."""

    def __init__(self, fonts: dict, budget: list[int], page_box, figures: list[int]):
        self.fonts, self.budget, self.page_box, self.figures = fonts, budget, page_box, figures
        self.scan = PageScan()
        self.seq = 0

    def problem(self, message: str) -> None:
        if message not in self.scan.problems:
            self.scan.problems.append(message)

    # -- resources
    def _font(self, resources, name: str) -> _Font:
        fonts = resources.get("/Font") if resources is not None else None
        ref = fonts.get_object().get(name) if fonts is not None else None
        if ref is None:
            raise ContentError(f"the font {name} is not among the page's resources")
        key = getattr(ref, "idnum", None) or id(ref)
        if key not in self.fonts:
            self.fonts[key] = load_font(ref.get_object())
        return self.fonts[key]

    def _gs(self, resources, name: str, g: _GState) -> None:
        table = resources.get("/ExtGState") if resources is not None else None
        d = table.get_object().get(name) if table is not None else None
        if d is None:
            raise ContentError(f"the graphics state {name} is not among the page's resources")
        d = d.get_object()
        extra = sorted(set(d) - _ALLOWED_GS)
        if extra:
            raise ContentError(f"a graphics state with {', '.join(extra)} (soft masks, blend modes and "
                               "transfer functions are not written by the renderer)")
        if "/ca" in d:
            g.alpha = float(d["/ca"])
        if "/LW" in d:
            g.line_width = float(d["/LW"])

    # -- the stream
    def run(self, data: bytes, resources, g: _GState, xobject: int | None, depth: int,
            outer: tuple[bool, int | None] = (False, None)) -> None:
        """``outer``: (in an artifact, the figure) where the stream is drawn (a form XObject)."""
        stack: list[_GState] = []
        marked: list[tuple[bool, int | None]] = [outer]   # (artifact, figure) of each open sequence
        path: list[list[tuple[float, float]]] = []     # subpaths
        clip_pending = False
        tm = tlm = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
        in_text = False
        positioned = False
        for op, operands in _Tokens(data, self.budget):
            if op == b"q":
                stack.append(g.copy())
            elif op == b"Q":
                if stack:
                    g = stack.pop()
            elif op == b"cm":
                g.ctm = _mul(tuple(_nums(operands, 6)), g.ctm)
            elif op == b"gs":
                self._gs(resources, str(operands[-1]) if operands else "", g)
            elif op in (b"rg", b"g", b"k", b"cs", b"sc", b"scn"):
                self._colour(op, operands, g)
            elif op in _PATH:
                points = self._path_points(op, operands, g.ctm)
                if op in (b"m", b"re") or not path:
                    path.append([])
                path[-1].extend(points)
                if op == b"re":
                    path.append([])
            elif op in (b"W", b"W*"):
                clip_pending = True
            elif op in _PAINT_FILL or op in _PAINT_STROKE or op == b"n":
                if path and op != b"n":
                    self._paint(op, path, g)
                points = [p for sub in path for p in sub]
                if clip_pending and points:
                    g.clip = _intersect(g.clip, _box(points))
                path, clip_pending = [], False
            elif op == b"w":
                g.line_width = _nums(operands, 1)[0]
            elif op == b"BT":
                tm = tlm = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
                in_text, positioned = True, False
            elif op == b"ET":
                in_text = False
            elif op == b"Tf":
                if len(operands) < 2 or not isinstance(operands[-2], str):
                    raise ContentError("Tf without a font name")
                g.font, g.size = self._font(resources, operands[-2]), _nums(operands, 1)[0]
            elif op == b"Tr":
                g.mode = int(_nums(operands, 1)[0])
            elif op == b"Tz":
                g.scale = _nums(operands, 1)[0]
            elif op == b"Ts":
                g.rise = _nums(operands, 1)[0]
            elif op == b"TL":
                g.leading = _nums(operands, 1)[0]
            elif op == b"Tc":
                g.char_space = _nums(operands, 1)[0]
            elif op == b"Tw":
                g.word_space = _nums(operands, 1)[0]
            elif op in (b"Td", b"TD"):
                tx, ty = _nums(operands, 2)
                if op == b"TD":
                    g.leading = -ty
                tm = tlm = _mul((1.0, 0.0, 0.0, 1.0, tx, ty), tlm)
                positioned = True
            elif op == b"Tm":
                tm = tlm = tuple(_nums(operands, 6))
                positioned = True
            elif op == b"T*":
                tm = tlm = _mul((1.0, 0.0, 0.0, 1.0, 0.0, -g.leading), tlm)
                positioned = True
            elif op in (b"Tj", b"TJ", b"'", b'"'):
                if not in_text:
                    raise ContentError("text shown outside BT ... ET")
                if op in (b"'", b'"'):
                    tm = tlm = _mul((1.0, 0.0, 0.0, 1.0, 0.0, -g.leading), tlm)
                    positioned = True
                if not positioned:
                    self.problem("two texts shown from one position (the renderer positions every text)")
                tm = self._show(operands, g, tm, xobject, marked[-1])
                positioned = False
            elif op in (b"BMC", b"BDC"):
                tag = self._marked(op, operands, resources)
                artifact, figure = marked[-1]
                if tag == "/Figure" and figure is None:
                    figure = self.figures[0]
                    self.figures[0] += 1
                marked.append((artifact or tag == "/Artifact", figure))
            elif op == b"EMC":
                if len(marked) > 1:
                    marked.pop()
            elif op == b"Do":
                self._do(operands, resources, g, depth, marked[-1])
            elif op == b"BI":
                raise ContentError("an inline image (the datasheet has no images)")
            elif op == b"sh":
                raise ContentError("a shading operator (the renderer does not write one for the datasheet)")
            elif op not in _HARMLESS:
                raise ContentError(f"the operator {op.decode('latin-1')[:20]!r}, which the renderer does not write")

    def _colour(self, op: bytes, operands, g: _GState) -> None:
        if op == b"rg":
            g.fill, g.fill_space = tuple(_nums(operands, 3)), "/DeviceRGB"
        elif op == b"g":
            v = _nums(operands, 1)[0]
            g.fill, g.fill_space = (v, v, v), "/DeviceGray"
        elif op == b"k":
            c, m, y, k = _nums(operands, 4)
            g.fill, g.fill_space = ((1 - c) * (1 - k), (1 - m) * (1 - k), (1 - y) * (1 - k)), "/DeviceCMYK"
        elif op == b"cs":
            g.fill_space = str(operands[-1]) if operands else ""
            g.fill = (0.0, 0.0, 0.0) if g.fill_space in ("/DeviceGray", "/DeviceRGB") else None
        else:   # sc / scn in the current space
            vals = [v for v in operands if isinstance(v, float)]
            if g.fill_space == "/DeviceRGB" and len(vals) == 3:
                g.fill = tuple(vals)
            elif g.fill_space == "/DeviceGray" and len(vals) == 1:
                g.fill = (vals[0],) * 3
            else:
                g.fill = None

    @staticmethod
    def _path_points(op: bytes, operands, ctm) -> list[tuple[float, float]]:
        if op == b"h":
            return []
        if op == b"re":
            x, y, w, h = _nums(operands, 4)
            return [_apply(ctm, x, y), _apply(ctm, x + w, y), _apply(ctm, x, y + h), _apply(ctm, x + w, y + h)]
        n = {b"m": 2, b"l": 2, b"c": 6, b"v": 4, b"y": 4}[op]
        vals = _nums(operands, n)
        return [_apply(ctm, vals[k], vals[k + 1]) for k in range(0, n, 2)]

    def _paint(self, op: bytes, path, g: _GState) -> None:
        subs = [_box(sub) for sub in path if sub]
        if not subs:
            return
        if op in _PAINT_STROKE:
            half = g.line_width * math.hypot(g.ctm[0], g.ctm[1]) / 2
            if half < 1.5:        # a thin line cannot hide text
                return
            subs = [(b[0] - half, b[1] - half, b[2] + half, b[3] + half) for b in subs]
            subs = [_box([p for b in subs for p in ((b[0], b[1]), (b[2], b[3]))])]   # no holes
        parts = [c for c in (_intersect(b, g.clip) for b in subs) if c[0] < c[2] and c[1] < c[3]]
        if not parts:
            return
        self.seq += 1
        self._count(self.scan.paints)
        box = _box([p for b in parts for p in ((b[0], b[1]), (b[2], b[3]))])
        self.scan.paints.append(Paint(self.seq, box, g.fill, g.alpha, parts))

    def _count(self, items: list) -> None:
        if len(items) >= MAX_ITEMS:
            raise ContentError(f"more than {MAX_ITEMS:,} texts or drawings on a page (a datasheet page "
                               "has some hundreds)")

    def _marked(self, op: bytes, operands, resources) -> str:
        tag = operands[0] if operands and isinstance(operands[0], str) else ""
        if op == b"BDC" and len(operands) >= 2:
            props = operands[1]
            if isinstance(props, str):
                table = resources.get("/Properties") if resources is not None else None
                raise ContentError(f"marked content with the named properties {props} ({'optional content' if table else 'not among the resources'})")
            if isinstance(props, dict) and set(props) - {"/MCID"}:
                raise ContentError(f"marked content {tag} with {', '.join(sorted(set(props) - {'/MCID'}))} "
                                   "(the renderer writes only /MCID)")
        if tag == "/OC":
            raise ContentError("optional content (a layer a reader may not see)")
        return tag

    def _do(self, operands, resources, g: _GState, depth: int, outer: tuple) -> None:
        name = operands[-1] if operands and isinstance(operands[-1], str) else ""
        table = resources.get("/XObject") if resources is not None else None
        ref = table.get_object().get(name) if table is not None else None
        if ref is None:
            raise ContentError(f"the XObject {name} is not among the resources")
        xo = ref.get_object()
        if xo.get("/Subtype") != "/Form":
            raise ContentError(f"an XObject of type {xo.get('/Subtype')} (the datasheet draws its charts "
                               "as forms and has no images)")
        if depth >= MAX_DEPTH:
            raise ContentError(f"forms nested more than {MAX_DEPTH} deep")
        extra = sorted(set(xo) - {"/Type", "/Subtype", "/BBox", "/Matrix", "/Resources", "/Length",
                                  "/Filter", "/DecodeParms", "/FormType", "/Group"})
        if extra:
            raise ContentError(f"a form XObject with {', '.join(extra)} (the renderer does not write these)")
        inner = g.copy()
        matrix = xo.get("/Matrix")
        if matrix is not None:
            inner.ctm = _mul(tuple(float(v) for v in matrix), inner.ctm)
        bbox = xo.get("/BBox")
        if bbox is not None and len(bbox) == 4:
            x0, y0, x1, y1 = (float(v) for v in bbox)
            inner.clip = _intersect(inner.clip, _box([_apply(inner.ctm, x, y) for x in (x0, x1) for y in (y0, y1)]))
        number = getattr(ref, "idnum", None)
        self.scan.xobjects.append(number)
        res = xo.get("/Resources")
        self.run(xo.get_data(), res.get_object() if res is not None else resources, inner, number, depth + 1,
                 outer)

    def _show(self, operands, g: _GState, tm, xobject, where: tuple):
        if g.font is None:
            raise ContentError("text shown before a font is chosen")
        if g.scale != 100 or g.rise or g.char_space or g.word_space:
            self.problem("text scaled, raised or spaced by the text state (Tz, Ts, Tc, Tw), which the "
                         "renderer does not do")
        items = operands[-1] if operands and isinstance(operands[-1], list) else operands[-1:]
        self.budget[1] -= sum(len(item) // 2 for item in items if isinstance(item, bytes))
        if self.budget[1] < 0:
            raise ContentError(f"more than {MAX_TEXT_CHARS:,} characters of text (a datasheet has well "
                               "under a million)")
        chars: list[str] = []
        advance = lo = hi = 0.0          # in text space units; lo, hi: the extremes reached
        for item in items:
            if isinstance(item, float):
                if abs(item) > MAX_KERN:
                    self.problem(f"text moved by {abs(item) / 1000:g} em inside its line (the renderer "
                                 f"moves glyphs by at most {MAX_KERN / 1000:g} em)")
                advance -= item / 1000 * g.size
            elif isinstance(item, bytes):
                for k in range(0, len(item) - 1, 2):
                    code = (item[k] << 8) | item[k + 1]
                    chars.append(g.font.to_unicode.get(code, "\ufffd"))
                    advance += g.font.widths.get(code, g.font.default_width) / 1000 * g.size + g.char_space
            lo, hi = min(lo, advance), max(hi, advance)
        lo, hi, advance = (v * g.scale / 100 for v in (lo, hi, advance))
        trm = _mul(tm, g.ctm)
        start = _apply(trm, lo, g.rise)
        end = _apply(trm, hi, g.rise)
        top = _apply(trm, lo, g.rise + g.size)
        height = math.hypot(top[0] - start[0], top[1] - start[1])
        corner = _apply(trm, hi, g.rise + g.size)
        self.seq += 1
        self._count(self.scan.runs)
        self.scan.runs.append(Run(self.seq, "".join(chars), where[0], xobject, where[1],
                                  _box([start, end, top, corner]), height, g.fill, g.alpha, g.mode, g.clip))
        return _mul((1.0, 0.0, 0.0, 1.0, advance, 0.0), tm)


def _page_data(page) -> bytes:
    contents = page.get("/Contents")
    if contents is None:
        return b""
    contents = contents.get_object()
    if isinstance(contents, list):
        return b"\n".join(c.get_object().get_data() for c in contents)
    return contents.get_data()


def new_budget() -> list[int]:
    """What a whole PDF may hold: [content-stream tokens, characters of text] (shared by its pages)."""
    return [MAX_TOKENS, MAX_TEXT_CHARS]


def scan_page(page, fonts: dict, budget: list[int], figures: list[int] | None = None) -> PageScan:
    """Every text and drawing of ``page`` (pypdf page), in the order they are drawn, with each
    text's background (the last opaque drawing under its middle) and whether an opaque drawing
    covers it later. ``fonts``: a cache shared across pages; ``budget``: tokens and characters left
    (:func:`new_budget`, shared); ``figures``: the next figure's number (a list of one int, shared). A page
    that cannot be read ends its scan with a problem."""
    box = tuple(float(v) for v in page.mediabox)
    it = _Interpreter(fonts, budget, box, figures if figures is not None else [0])
    try:
        resources = page.get("/Resources")
        it.run(_page_data(page), resources.get_object() if resources is not None else None, _GState(), None, 0)
    except ContentError as e:
        it.problem(str(e))
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, ZeroDivisionError) as e:
        it.problem(f"its content cannot be read ({type(e).__name__})")
    _layers(it.scan)
    return it.scan


def _layers(scan: PageScan) -> None:
    """Each run's background and whether a later opaque drawing covers its middle."""
    import numpy as np

    runs = scan.runs
    opaque = [p for p in scan.paints if p.alpha >= 0.5 and p.colour is not None]
    if not runs or not opaque:
        return
    pb = np.array([b for p in opaque for b in p.parts], dtype=float)
    starts = np.cumsum([0] + [len(p.parts) for p in opaque[:-1]])
    ps = np.array([p.seq for p in opaque], dtype=np.int64)
    for lo in range(0, len(runs), 512):
        chunk = runs[lo:lo + 512]
        cx = np.array([(r.box[0] + r.box[2]) / 2 for r in chunk])[:, None]
        cy = np.array([(r.box[1] + r.box[3]) / 2 for r in chunk])[:, None]
        rs = np.array([r.seq for r in chunk], dtype=np.int64)[:, None]
        in_part = (pb[:, 0] <= cx) & (cx <= pb[:, 2]) & (pb[:, 1] <= cy) & (cy <= pb[:, 3])
        inside = (np.add.reduceat(in_part.astype(np.int32), starts, axis=1) % 2) == 1
        before = np.where(inside & (ps < rs), ps, -1).max(axis=1)
        after = (inside & (ps > rs)).any(axis=1)
        index = {int(s): k for k, s in enumerate(ps)}
        for r, b, a in zip(chunk, before, after):
            if b >= 0:
                r.background = tuple(opaque[index[int(b)]].colour)
            r.covered = bool(a)
