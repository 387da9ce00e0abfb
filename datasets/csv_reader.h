// Reading CSV text into a table of cells: a header row, then rows of the same width.
// RFC 4180 quoting ("a, b" holds a comma, "" is a quote, a quoted field may span lines),
// CRLF line ends and a UTF-8 byte order mark are accepted.
//
//   Result<CsvTable> t = read_csv("data/iris.csv");
//   if (!t) { std::cerr << t.error().message << "\n"; return 1; }  // "iris.csv:7: ..."
//   t->header[0] == "sepal_length";  t->rows[0][4] == "setosa";  t->lines[0] == 2;
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/core/result.h"

namespace mls::data {

struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // each header.size() cells
  std::vector<int64_t> lines;                  // the 1-based line where each row starts

  // The column called `name`, if any.
  std::optional<size_t> column(std::string_view name) const;
};

// Stated limits, so that memory follows the real content: a cell costs a string (32 bytes)
// however short, so a file of commas would otherwise take 30 times its size.
inline constexpr uint64_t kMaxCsvBytes = uint64_t{1} << 30;  // 1 GiB of text
inline constexpr uint64_t kMaxCsvCells = uint64_t{1} << 25;  // 33.5 million cells (~1 GiB)
inline constexpr uint64_t kMaxCsvColumns = 1 << 16;

// Every error names `name` and the line: "data.csv:5: expected 4 fields, found 3". A NUL
// byte (a binary or sparse file) and the limits above are errors too.
Result<CsvTable> parse_csv(std::string_view text, const std::string& name, char delimiter = ',');
Result<CsvTable> read_csv(const std::string& path, char delimiter = ',');

// Cells that mean "no value": empty, NA, N/A, nan, null (any case, surrounding spaces).
bool is_missing_cell(std::string_view cell);

// A finite number in the whole cell (surrounding spaces and a leading '+' allowed).
std::optional<double> parse_number(std::string_view cell);

// Reads a whole regular file of at most `max_bytes`; errors start with `path`. A FIFO, a
// device or a directory is refused unread.
Result<std::string> read_text_file(const std::string& path, uint64_t max_bytes = kMaxCsvBytes);

}  // namespace mls::data
