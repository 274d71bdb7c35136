"""Render every page of a bundle's README.pdf (or any PDF) to PNG, for a human to look at.

    python benchmarks/render_datasheet_pages.py BUNDLE_OR_PDF [--out DIR] [--dpi 80]

Writes DIR/page-01.png, page-02.png, ... (default DIR: BUNDLE/../<name>-pages) and prints, per
page, the number of characters of text on it and its share of an average page, so that a
near-empty page stands out before you open the images. Uses pypdfium2 when it is installed,
else poppler's ``pdftoppm`` (Debian: apt-get install poppler-utils); without either it only
prints the text counts and says so (exit code 0: this is a review aid, not a test).

Typical use: ``dpbundle release --example births --out /tmp/b`` then
``python benchmarks/render_datasheet_pages.py /tmp/b`` and open the PNGs.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path


def page_text_lengths(pdf: Path) -> list[int]:
    from pypdf import PdfReader

    return [len("".join((page.extract_text() or "").split())) for page in PdfReader(str(pdf)).pages]


def _with_pypdfium2(pdf: Path, out: Path, dpi: int) -> list[Path] | None:
    try:
        import pypdfium2 as pdfium  # type: ignore[import-not-found]
    except ImportError:
        return None
    paths = []
    doc = pdfium.PdfDocument(str(pdf))
    for i in range(len(doc)):
        image = doc[i].render(scale=dpi / 72).to_pil()
        path = out / f"page-{i + 1:02d}.png"
        image.save(path)
        paths.append(path)
    return paths


def _with_pdftoppm(pdf: Path, out: Path, dpi: int) -> list[Path] | None:
    exe = shutil.which("pdftoppm")
    if not exe:
        return None
    for old in out.glob("page-*.png"):
        old.unlink()
    subprocess.run([exe, "-png", "-r", str(dpi), str(pdf), str(out / "page")], check=True)
    paths = sorted(out.glob("page-*.png"))
    # pdftoppm numbers pages page-1.png or page-01.png depending on the page count: normalise
    renamed = []
    for p in paths:
        number = int(p.stem.split("-")[-1])
        target = out / f"page-{number:02d}.png"
        if p != target:
            p.rename(target)
        renamed.append(target)
    return sorted(renamed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", type=Path, help="a bundle directory (its README.pdf) or a PDF file")
    ap.add_argument("--out", type=Path, default=None, help="folder for the PNGs")
    ap.add_argument("--dpi", type=int, default=80)
    args = ap.parse_args(argv)
    pdf = args.source / "README.pdf" if args.source.is_dir() else args.source
    if not pdf.is_file():
        print(f"{pdf}: no such file", file=sys.stderr)
        return 2
    out = args.out or pdf.parent.parent / f"{pdf.parent.name if args.source.is_dir() else pdf.stem}-pages"
    out.mkdir(parents=True, exist_ok=True)

    lengths = page_text_lengths(pdf)
    mean = sum(lengths) / max(len(lengths), 1)
    for i, n in enumerate(lengths, 1):
        flag = "  <- nearly empty" if i < len(lengths) and n < 0.15 * mean else ""
        print(f"page {i:2d}: {n:6d} characters ({100 * n / mean:5.0f}% of an average page){flag}")

    paths = _with_pypdfium2(pdf, out, args.dpi) or _with_pdftoppm(pdf, out, args.dpi)
    if paths is None:
        print("skipped the images: neither pypdfium2 (pip install pypdfium2) nor pdftoppm "
              "(apt-get install poppler-utils) is installed")
        return 0
    print(f"{len(paths)} page image(s) in {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
