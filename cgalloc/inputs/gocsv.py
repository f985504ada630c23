"""Go's ``encoding/csv`` Reader as pflag's StringSlice flags use it: ``readAsCSV`` reads each
occurrence of ``--enforce-node-allocatable`` as one record with ``csv.NewReader``'s defaults
(comma ``,``, no comment character, LazyQuotes and TrimLeadingSpace off).

Ported from go/src/encoding/csv/reader.go (readLine, readRecord; positions as Go 1.17 and later
report them: lines and byte columns from 1). It works on the UTF-8 bytes, as Go does, so a
column counts bytes and a field may hold any byte."""

from __future__ import annotations

BARE_QUOTE = 'bare " in non-quoted-field'  # csv.ErrBareQuote
QUOTE = 'extraneous or missing " in quoted-field'  # csv.ErrQuote


class CsvError(ValueError):
    """A ``csv.ParseError``; ``str()`` is Go's ``Error()``."""

    def __init__(self, start_line: int, line: int, column: int, reason: str) -> None:
        self.start_line, self.line, self.column, self.reason = start_line, line, column, reason
        where = f"parse error on line {line}, column {column}: {reason}"
        super().__init__(where if start_line == line else f"record on line {start_line}; {where}")


def _nl(line: bytes) -> int:
    """Go's lengthNL: 1 when ``line`` ends with its newline."""
    return 1 if line.endswith(b"\n") else 0


class Reader:
    """Records of ``text`` one ``read()`` at a time, as ``csv.Reader.Read`` gives them."""

    def __init__(self, text: str) -> None:
        # surrogateescape: a command-line argument's undecodable bytes come back as themselves;
        # another lone surrogate (a YAML "\ud800" escape) has no byte of its own: kept whole
        self._errors = "surrogateescape"
        try:
            self._data = text.encode("utf-8", self._errors)
        except UnicodeEncodeError:
            self._errors = "surrogatepass"
            self._data = text.encode("utf-8", self._errors)
        self._at = 0
        self._lines = 0  # Go's numLine: every readLine call counts, even one at the end

    def _read_line(self) -> tuple[bytes, bool]:
        """The next line with its newline, and whether the input had nothing left (io.EOF)."""
        end = self._data.find(b"\n", self._at)
        end = len(self._data) if end < 0 else end + 1
        line, self._at = self._data[self._at : end], end
        self._lines += 1
        if not line:
            return line, True
        if not line.endswith(b"\n") and line.endswith(b"\r"):
            line = line[:-1]  # Go drops a \r before the end of the input
        if line.endswith(b"\r\n"):
            line = line[:-2] + b"\n"
        return line, False

    def read(self) -> list[str] | None:
        """The next record, or None at the end of the input; a malformed one raises CsvError."""
        line, eof = self._read_line()
        while not eof and len(line) == _nl(line):  # blank lines are skipped
            line, eof = self._read_line()
        if eof:
            return None
        start, line_no, col = self._lines, self._lines, 1
        fields: list[bytes] = []
        while True:
            if not line.startswith(b'"'):
                comma = line.find(b",")
                field = line[:comma] if comma >= 0 else line[: len(line) - _nl(line)]
                bare = field.find(b'"')
                if bare >= 0:
                    raise CsvError(start, self._lines, col + bare, BARE_QUOTE)
                fields.append(field)
                if comma < 0:
                    break
                line, col = line[comma + 1 :], col + comma + 1
                continue
            buf = bytearray()
            line, col = line[1:], col + 1
            while True:
                quote = line.find(b'"')
                if quote >= 0:
                    buf += line[:quote]
                    line, col = line[quote + 1 :], col + quote + 1
                    if line.startswith(b'"'):  # "" is one quote
                        buf += b'"'
                        line, col = line[1:], col + 1
                    elif line.startswith(b","):
                        line, col = line[1:], col + 1
                        break
                    elif len(line) == _nl(line):
                        fields.append(bytes(buf))
                        return self._decode(fields)
                    else:
                        raise CsvError(start, self._lines, col - 1, QUOTE)
                elif line:
                    buf += line
                    col += len(line)
                    line, _ = self._read_line()  # a quoted field runs on over line breaks
                    if line:
                        line_no, col = line_no + 1, 1
                else:
                    raise CsvError(start, line_no, col, QUOTE)
            fields.append(bytes(buf))
        return self._decode(fields)

    def _decode(self, fields: list[bytes]) -> list[str]:
        return [f.decode("utf-8", self._errors) for f in fields]
