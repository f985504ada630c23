"""cgalloc.inputs.gocsv against Go's own table: go/src/encoding/csv/reader_test.go readTests, run as
TestRead runs them (ReadAll; the first error with its StartLine, Line and Column), Go 1.19.

In the inputs § starts a field, ¶ starts a record and ∑ marks where the error is; they are
removed before parsing (makePositions). Only rows with csv.NewReader's defaults are here, the
options pflag's readAsCSV uses: the rows setting Comma, Comment, LazyQuotes, TrimLeadingSpace
or a positive FieldsPerRecord (Semicolon, TrimSpace, Comment, LazyQuotes, BareQuotes,
BareDoubleQuotes, TrimQuote, BadFieldCount, BadFieldCountMultiple, BadFieldCount1,
TrailingCommaSpaceEOF/EOL, TrailingCommaLine3, TrailingCommaIneffective1, the NonASCII rows,
HugeLines, LazyQuoteWithTrailingCRLF, LazyOddQuotes and the BadComma/BadComment rows) test
options cgalloc has no use for. ReadAllReuseRecord and the RFC4180/BlankLine FieldCount rows
are kept: ReuseRecord and FieldsPerRecord 0 change nothing in their records."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cgalloc.inputs.gocsv import BARE_QUOTE, QUOTE, CsvError, Reader

# (name, input with markers, records, error) from readTests
READ_TESTS = [
    ("Simple", "§a,§b,§c\n", [["a", "b", "c"]], None),
    ("CRLF", "§a,§b\r\n¶§c,§d\r\n", [["a", "b"], ["c", "d"]], None),
    ("BareCR", "§a,§b\rc,§d\r\n", [["a", "b\rc", "d"]], None),
    (
        "RFC4180test",
        '§#field1,§field2,§field3\n¶§"aaa",§"bb\nb",§"ccc"\n¶§"a,a",§"b""bb",§"ccc"\n'
        "¶§zzz,§yyy,§xxx\n",
        [
            ["#field1", "field2", "field3"],
            ["aaa", "bb\nb", "ccc"],
            ["a,a", 'b"bb', "ccc"],
            ["zzz", "yyy", "xxx"],
        ],
        None,
    ),
    ("NoEOLTest", "§a,§b,§c", [["a", "b", "c"]], None),
    (
        "MultiLine",
        '§"two\nline",§"one line",§"three\nline\nfield"',
        [["two\nline", "one line", "three\nline\nfield"]],
        None,
    ),
    ("BlankLine", "§a,§b,§c\n\n¶§d,§e,§f\n\n", [["a", "b", "c"], ["d", "e", "f"]], None),
    ("BlankLineFieldCount", "§a,§b,§c\n\n¶§d,§e,§f\n\n", [["a", "b", "c"], ["d", "e", "f"]], None),
    ("LeadingSpace", "§ a,§  b,§   c\n", [[" a", "  b", "   c"]], None),
    ("NoComment", "§#1,§2,§3\n¶§a,§b,§c", [["#1", "2", "3"], ["a", "b", "c"]], None),
    ("BadDoubleQuotes", '§a∑""b,c', [], BARE_QUOTE),
    ("BadBareQuote", '§a ∑"word","b"', [], BARE_QUOTE),
    ("BadTrailingQuote", '§"a word",b∑"', [], BARE_QUOTE),
    ("ExtraneousQuote", '§"a ∑"word","b"', [], QUOTE),
    ("FieldCount", "§a,§b,§c\n¶§d,§e", [["a", "b", "c"], ["d", "e"]], None),
    ("TrailingCommaEOF", "§a,§b,§c,§", [["a", "b", "c", ""]], None),
    ("TrailingCommaEOL", "§a,§b,§c,§\n", [["a", "b", "c", ""]], None),
    ("NotTrailingComma3", "§a,§b,§c,§ \n", [["a", "b", "c", " "]], None),
    (
        "CommaFieldTest",
        "§x,§y,§z,§w\n¶§x,§y,§z,§\n¶§x,§y,§,§\n¶§x,§,§,§\n¶§,§,§,§\n"
        '¶§"x",§"y",§"z",§"w"\n¶§"x",§"y",§"z",§""\n¶§"x",§"y",§"",§""\n'
        '¶§"x",§"",§"",§""\n¶§"",§"",§"",§""\n',
        [
            ["x", "y", "z", "w"],
            ["x", "y", "z", ""],
            ["x", "y", "", ""],
            ["x", "", "", ""],
            ["", "", "", ""],
            ["x", "y", "z", "w"],
            ["x", "y", "z", ""],
            ["x", "y", "", ""],
            ["x", "", "", ""],
            ["", "", "", ""],
        ],
        None,
    ),
    ("ReadAllReuseRecord", "§a,§b\n¶§c,§d", [["a", "b"], ["c", "d"]], None),
    ("StartLine1", '§a,"b\nc∑"d,e', [], QUOTE),  # Issue 19019
    ("StartLine2", '§a,§b\n¶§"d\n\n,e∑', [["a", "b"]], QUOTE),
    ("CRLFInQuotedField", '§A,§"Hello\r\nHi",§B\r\n', [["A", "Hello\nHi", "B"]], None),
    # Issue 19410: any byte may stand in a field (Go's "\xb4" is a byte, not U+00B4)
    ("BinaryBlobField", "§x09\x41\udcb4\x1c,§aktau", [["x09A\udcb4\x1c", "aktau"]], None),
    ("TrailingCR", "§field1,§field2\r", [["field1", "field2"]], None),
    ("QuotedTrailingCR", '§"field"\r', [["field"]], None),
    ("QuotedTrailingCRCR", '§"field∑"\r\r', [], QUOTE),
    ("FieldCR", "§field\rfield\r", [["field\rfield"]], None),
    ("FieldCRCR", "§field\r\rfield\r\r", [["field\r\rfield\r"]], None),
    ("FieldCRCRLF", "§field\r\r\n¶§field\r\r\n", [["field\r"], ["field\r"]], None),
    ("FieldCRCRLFCR", "§field\r\r\n¶§\rfield\r\r\n\r", [["field\r"], ["\rfield\r"]], None),
    (
        "FieldCRCRLFCRCR",
        "§field\r\r\n¶§\r\rfield\r\r\n¶§\r\r",
        [["field\r"], ["\r\rfield\r"], ["\r"]],
        None,
    ),
    (
        "MultiFieldCRCRLFCRCR",
        "§field1,§field2\r\r\n¶§\r\rfield1,§field2\r\r\n¶§\r\r,§",
        [["field1", "field2\r"], ["\r\rfield1", "field2\r"], ["\r\r", ""]],
        None,
    ),
    ("QuotedFieldMultipleLF", '§"\n\n\n\n"', [["\n\n\n\n"]], None),
    ("MultipleCRLF", "\r\n\r\n\r\n\r\n", [], None),
    ("QuoteWithTrailingCRLF", '§"foo∑"bar"\r\n', [], QUOTE),
    ("DoubleQuoteWithTrailingCRLF", '§"foo""bar"\r\n', [['foo"bar']], None),
    ("EvenQuotes", '§""""""""', [['"""']], None),
    ("OddQuotes", '§"""""""∑', [], QUOTE),
]


def make_positions(text):
    """reader_test.go makePositions: the input without markers, the line of each record's first
    field, and the (line, byte column) of the ∑ mark."""
    out, starts, error_at = bytearray(), [], None
    line, col, new_record = 1, 1, True
    for ch in text:
        if ch == "\n":
            line, col = line + 1, 1
            out += b"\n"
        elif ch == "§":
            if new_record:
                starts.append(line)
                new_record = False
        elif ch == "¶":
            new_record = True
        elif ch == "∑":
            error_at = (line, col)
        else:
            raw = ch.encode("utf-8", "surrogateescape")
            out += raw
            col += len(raw)
    return out.decode("utf-8", "surrogateescape"), starts, error_at


def read_all(text):
    reader, records = Reader(text), []
    while (record := reader.read()) is not None:
        records.append(record)
    return records


# go/src/encoding/csv/reader_test.go TestRead (Go 1.19)
@pytest.mark.parametrize(
    ("marked", "records", "error"),
    [row[1:] for row in READ_TESTS],
    ids=[row[0] for row in READ_TESTS],
)
def test_read_tests(marked, records, error):
    text, starts, error_at = make_positions(marked)
    if error is None:
        assert read_all(text) == records
        return
    reader = Reader(text)
    for record in records:  # the records before the one in error
        assert reader.read() == record
    with pytest.raises(CsvError) as caught:
        reader.read()
    assert caught.value.reason == error
    assert (caught.value.start_line, caught.value.line, caught.value.column) == (
        starts[len(records)],
        *error_at,
    )


# ParseError.Error(): the record's first line is named when the error is on a later one
@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('a,"b\nc"d,e', "record on line 1; parse error on line 2, column 2: " + QUOTE),
        ('po"ds', "parse error on line 1, column 3: " + BARE_QUOTE),
        ('"pods', "parse error on line 1, column 6: " + QUOTE),
    ],
)
def test_error_text_is_go_s(text, message):
    with pytest.raises(CsvError, match="^" + re.escape(message) + "$"):
        read_all(text)


def test_columns_count_bytes_as_go_does():
    # "é" is two bytes, so a quote after it is at byte column 3 (Go's), not character column 2
    with pytest.raises(CsvError) as caught:
        read_all('é"')
    assert caught.value.column == 3
    with pytest.raises(CsvError) as caught:
        read_all('aé"')
    assert caught.value.column == 4


@given(st.text(alphabet=st.characters(blacklist_characters='"\r\n'), min_size=1, max_size=40))
def test_plain_text_splits_on_every_comma(text):
    # with no quote and no line break a record is the text split at each comma, spaces and
    # empty items kept (what cgalloc did before it read the flag as CSV)
    assert Reader(text).read() == text.split(",")


@given(st.text(alphabet=',"\r\n a\xe9\udcff', max_size=30))
def test_any_text_reads_to_the_end_or_one_csv_error(text):
    reader, total = Reader(text), 0
    try:
        while (record := reader.read()) is not None:
            total += len(record)
            assert total <= len(text) + 1  # each record takes input, so reading ends
    except CsvError as err:
        assert err.reason in (QUOTE, BARE_QUOTE) and err.line >= err.start_line >= 1


def test_a_lone_surrogate_is_kept_not_a_traceback():
    # argv's undecodable bytes arrive as \udc80-\udcff; a YAML "\ud800" escape is another
    assert Reader("pods,\ud800").read() == ["pods", "\ud800"]
    assert Reader("pods,\udcff").read() == ["pods", "\udcff"]
