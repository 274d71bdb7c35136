"""Short R and Stata programs that read a bundle's data.csv with the codebook's order.

``reading_snippets(columns)`` gives, for a bundle's released columns (its public files: the
datasheet's :class:`~.public.PublicFiles` ``columns``, or anything with ``.name`` and ``.ordered``),
the text of

- ``r``: R with readr; every column becomes a factor whose levels are the codebook's labels in
  the codebook's order (``codebook.csv``: ``column``, ``order``, ``label``), ordered
  (``factor(..., ordered = TRUE)``) for the columns datapackage.json marks ``categoriesOrdered``
  (bins and ordinals); a helper gives the number each value stands for (``number``);
- ``stata``: Stata 14 or later; ``import delimited`` of codebook.csv, one value label per column
  (values 1, 2, ... in the codebook's order, text the label), saved with ``label save``, then
  ``import delimited`` of data.csv and ``encode ..., label() noextend`` of every column, so that
  each column holds the value's position in the order, labelled with its text.

Both read every cell as text (``"1"`` stays a label, ``"NA"`` is not missing) and fail on a cell
that is not a label of the codebook. A bundle whose codebook has the ``special`` column (special
values: not applicable, unknown) gets programs that make each special value NA in its column and
name it in ``COLUMN_special`` (R), or an extended missing value ``.a``, ``.b``, ... labelled with its
label (Stata: excluded from statistics, as missing values are). The text depends only on the column names and their
``ordered`` flags, so the datasheet shows the same programs whenever it is rendered again.
docs/reading-the-data.md explains them.
"""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["reading_snippets", "r_snippet", "stata_snippet", "CODEBOOK_COLUMNS_USED"]

#: the codebook.csv columns the programs read (templates/datasheet/codebook.py CODEBOOK_FIELDS)
CODEBOOK_COLUMNS_USED = ("column", "order", "label", "number")


def _r_string(text: str) -> str:
    """An R string literal (double quotes; backslash and double quote escaped)."""
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _r_vector(items: Sequence[str], indent: str = "  ") -> str:
    if not items:
        return "character()"
    lines, line = [], "c("
    for i, item in enumerate(items):
        piece = _r_string(item) + (", " if i < len(items) - 1 else ")")
        if len(line) + len(piece) > 76 and line != "c(":
            lines.append(line.rstrip())
            line = indent
        line += piece
    lines.append(line)
    return "\n".join(lines)


def _has_specials(columns: Sequence[Any]) -> bool:
    """Has a column special values (codebook.csv's ``special`` column: not applicable, unknown)?"""
    return any(getattr(c, "special", None) for c in columns)


def r_snippet(columns: Sequence[Any]) -> str:
    """The R program (readr) for these columns; with special values (codebook.csv's ``special``),
    each column is a factor of its regular values (a special value is NA there) and beside a column
    with special values ``COLUMN_special`` holds the special value's label (NA elsewhere)."""
    ordered = [c.name for c in columns if bool(getattr(c, "ordered", False))]
    special = _has_specials(columns)
    head = ("""# Read data.csv with every column as a factor in the codebook's order (readr); a special
# value (codebook.csv: special, e.g. not applicable) is NA in its column and named in COLUMN_special.
""" if special else """# Read data.csv with every column as a factor in the codebook's order (readr).
""")
    factor = ("""  stopifnot(all(data[[column]] %in% column_rows$label))  # every cell is a label of the codebook
  special <- column_rows$label[column_rows$special != ""]
  if (length(special) > 0) {
    data[[paste0(column, "_special")]] <- factor(
      ifelse(data[[column]] %in% special, data[[column]], NA), levels = special)
  }
  data[[column]] <- factor(ifelse(data[[column]] %in% special, NA, data[[column]]),
                           levels = setdiff(column_rows$label, special),
                           ordered = column %in% ordered_columns)
""" if special else """  data[[column]] <- factor(data[[column]], levels = column_rows$label,
                           ordered = column %in% ordered_columns)
  stopifnot(!anyNA(data[[column]]))  # every cell is a label of the codebook
""")
    number = ("""# the number a column's values stand for (codebook.csv: number; NA for a special value)
number_of <- function(column) {
  column_rows <- codebook[codebook$column == column, ]
  numbers <- suppressWarnings(as.numeric(column_rows$number))
  numbers[match(as.character(data[[column]]), column_rows$label)]
}
""" if special else """# the number a column's values stand for (codebook.csv: number)
number_of <- function(column) {
  column_rows <- codebook[codebook$column == column, ]
  as.numeric(column_rows$number)[match(as.character(data[[column]]), column_rows$label)]
}
""")
    return head + f"""library(readr)
as_text <- cols(.default = col_character())
codebook <- read_csv("codebook.csv", col_types = as_text, na = character())
data <- read_csv("data.csv", col_types = as_text, na = character())
# columns whose values are ordered (datapackage.json: categoriesOrdered)
ordered_columns <- {_r_vector(ordered)}
for (column in names(data)) {{
  column_rows <- codebook[codebook$column == column, ]
  column_rows <- column_rows[order(as.integer(column_rows$order)), ]
{factor}}}
""" + number


def stata_snippet(columns: Sequence[Any]) -> str:
    """The Stata program (14 or later) for these columns; with special values (codebook.csv's
    ``special``), each becomes an extended missing value .a, .b, ... of its column (in the
    codebook's order), labelled with its label."""
    names = " ".join(c.name for c in columns)
    special = _has_specials(columns)
    head = ("""* Read data.csv with every column as labelled values 1, 2, ... in the codebook's order;
* a special value (codebook.csv: special, e.g. not applicable) becomes .a, .b, ... (labelled).
""" if special else """* Read data.csv with every column as labelled values 1, 2, ... in the codebook's order.
""")
    collect = """    if special[`r'] != "" local sp`i' `sp`i'' `o'
""" if special else ""
    step2 = ("""*    label of the codebook stops encode: noextend); special values to .a, .b, ...
""" if special else """*    label of the codebook stops encode: noextend).
""")
    recode = """    local k = 0
    foreach o of local sp`i' {
        local ++k
        local m = substr("abcdefghijklmnopqrstuvwxyz", `k', 1)
        local l : label `v' `o'
        replace `v' = .`m' if `v' == `o'
        label define `v' .`m' `"`l'"', modify
    }
""" if special else ""
    return head + f"""* Columns: {names}
* 1. One value label per column from codebook.csv (value = order, text = label).
import delimited using "codebook.csv", varnames(1) stringcols(_all) ///
    encoding("utf-8") bindquote(strict) case(preserve) clear
destring order, replace
generate long row = _n
bysort column (row): generate long first = row[1]
egen long colno = group(first)
sort row
label drop _all
forvalues r = 1/`=_N' {{
    local i = colno[`r']
    local o = order[`r']
    local l = label[`r']
    label define dpcol`i' `o' `"`l'"', add
{collect}}}
label save using "dpbundle_labels.do", replace
* 2. data.csv, every column as text, then encoded with its label (a cell that is no
{step2}import delimited using "data.csv", varnames(1) stringcols(_all) ///
    encoding("utf-8") bindquote(strict) case(preserve) clear
do "dpbundle_labels.do"
local i = 0
foreach v of varlist _all {{
    local ++i
    label copy dpcol`i' `v', replace
    label drop dpcol`i'
    encode `v', generate(dp_code_) label(`v') noextend
    order dp_code_, after(`v')
    drop `v'
    rename dp_code_ `v'
{recode}}}
"""


def reading_snippets(columns: Sequence[Any]) -> dict[str, str]:
    """``{"r": ..., "stata": ...}``: the programs that read data.csv for these columns."""
    columns = list(columns)
    return {"r": r_snippet(columns), "stata": stata_snippet(columns)}
