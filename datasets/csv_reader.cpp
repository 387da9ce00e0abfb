#include "datasets/csv_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/core/atomic_file.h"

namespace mls::data {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

Error at_line(const std::string& name, int64_t line, const std::string& what) {
  return make_error(name + ":" + std::to_string(line) + ": " + what);
}

}  // namespace

std::optional<size_t> CsvTable::column(std::string_view name) const {
  for (size_t i = 0; i < header.size(); ++i)
    if (header[i] == name) return i;
  return std::nullopt;
}

bool is_missing_cell(std::string_view cell) {
  cell = trim(cell);
  for (std::string_view m : {"", "na", "n/a", "nan", "null"})
    if (iequals(cell, m)) return true;
  return false;
}

std::optional<double> parse_number(std::string_view cell) {
  cell = trim(cell);
  if (!cell.empty() && cell.front() == '+') cell.remove_prefix(1);
  if (cell.empty()) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), v);
  if (ec != std::errc() || end != cell.data() + cell.size() || !std::isfinite(v))
    return std::nullopt;
  return v;
}

Result<std::string> read_text_file(const std::string& path, uint64_t max_bytes) {
  auto bytes = read_whole_file(path, max_bytes);
  if (!bytes) return bytes.error();
  return catching_bad_alloc(
      path, [&]() -> Result<std::string> { return std::string(bytes->begin(), bytes->end()); });
}

Result<CsvTable> parse_csv(std::string_view text, const std::string& name, char delimiter) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 BOM (Excel writes one)
  CsvTable t;
  std::vector<std::string> record;
  std::string cell;
  int64_t line = 1, record_line = 1;
  bool in_quotes = false, quoted = false, any = false;
  size_t i = 0;

  // Ends the current record; a blank line between records is skipped.
  uint64_t cells = 0;
  auto end_record = [&]() -> Result<void> {
    record.push_back(std::move(cell));
    cells += record.size();
    if (cells > kMaxCsvCells)
      return at_line(name, record_line,
                     "more than " + std::to_string(kMaxCsvCells) +
                         " cells in all, the most a CSV file may have here");
    cell.clear();
    const bool blank = record.size() == 1 && trim(record[0]).empty() && !quoted;
    quoted = false;
    if (blank) {
      record.clear();
      return {};
    }
    if (t.header.empty() && t.rows.empty() && !any) {
      for (size_t c = 0; c < record.size(); ++c) {
        std::string h(trim(record[c]));
        if (h.empty())
          return at_line(name, record_line, "column " + std::to_string(c + 1) + " has no name");
        for (size_t k = 0; k < c; ++k)
          if (t.header[k] == h) return at_line(name, record_line, "duplicate column '" + h + "'");
        t.header.push_back(std::move(h));
      }
      any = true;
    } else {
      if (record.size() != t.header.size())
        return at_line(name, record_line,
                       "expected " + std::to_string(t.header.size()) + " fields, found " +
                           std::to_string(record.size()));
      t.rows.push_back(std::move(record));
      t.lines.push_back(record_line);
    }
    record.clear();
    return {};
  };

  while (i < text.size()) {
    const char ch = text[i];
    if (ch == '\0')
      return at_line(name, line, "a NUL byte: this is not a text file (binary or sparse?)");
    if (in_quotes) {
      if (ch == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          cell += '"';
          i += 2;
          continue;
        }
        in_quotes = false;
      } else {
        if (ch == '\n') ++line;
        cell += ch;
      }
      ++i;
      continue;
    }
    if (ch == '"' && trim(cell).empty()) {
      cell.clear();  // spaces before an opening quote are not part of the value
      in_quotes = quoted = true;
    } else if (ch == delimiter) {
      record.push_back(std::move(cell));
      cell.clear();
      if (record.size() >= kMaxCsvColumns)
        return at_line(name, record_line,
                       "more than " + std::to_string(kMaxCsvColumns) +
                           " fields in one row, the most a CSV row may have here");
    } else if (ch == '\n' || ch == '\r') {
      if (auto r = end_record(); !r) return r.error();
      if (ch == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++line;
      record_line = line;
    } else {
      cell += ch;
    }
    ++i;
  }
  if (in_quotes) return at_line(name, record_line, "a quoted field is never closed");
  if (!cell.empty() || !record.empty() || quoted)
    if (auto r = end_record(); !r) return r.error();
  if (t.header.empty()) return make_error(name + ": empty file (a header row is required)");
  // Data where the header should be would silently become column names and lose a row.
  if (std::all_of(t.header.begin(), t.header.end(),
                  [](const std::string& h) { return parse_number(h).has_value(); }))
    return make_error(name +
                      ":1: the first row holds only numbers; a header row naming the columns "
                      "is required");
  return t;
}

Result<CsvTable> read_csv(const std::string& path, char delimiter) {
  Result<std::string> text = read_text_file(path);
  if (!text) return text.error();
  return catching_bad_alloc(path, [&] { return parse_csv(*text, path, delimiter); });
}

}  // namespace mls::data
