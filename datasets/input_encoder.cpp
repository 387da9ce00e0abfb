#include "datasets/input_encoder.h"

#include <algorithm>
#include <cstring>
#include <string_view>

#include "datasets/image_decode.h"
#include "datasets/npy.h"

namespace mls::data {
namespace {

bool starts_with(const std::vector<uint8_t>& b, std::initializer_list<uint8_t> magic) {
  if (b.size() < magic.size()) return false;
  return std::equal(magic.begin(), magic.end(), b.begin());
}

}  // namespace

InputEncoder::InputEncoder(Shape sample_shape, bool byte_features, Normalization normalization)
    : sample_shape_(std::move(sample_shape)),
      byte_features_(byte_features),
      normalization_(std::move(normalization)) {}

InputEncoder::InputEncoder(CsvEncoding csv, char delimiter, Normalization normalization)
    : sample_shape_{csv.width()},
      normalization_(std::move(normalization)),
      csv_(std::move(csv)),
      delimiter_(delimiter) {}

Result<HostBatch> InputEncoder::encode(const std::string& file) const {
  auto bytes = read_binary_file(file);
  if (!bytes) return bytes.error();
  return encode_bytes(*bytes, file);
}

Result<HostBatch> InputEncoder::encode_bytes(const std::vector<uint8_t>& bytes,
                                             const std::string& name) const {
  if (starts_with(bytes, {0x89, 'P', 'N', 'G'}) || starts_with(bytes, {0xff, 0xd8, 0xff}))
    return encode_image(bytes, name);
  if (starts_with(bytes, {0x93, 'N', 'U', 'M', 'P', 'Y'})) return encode_npy(bytes, name);
  return encode_csv(bytes, name);
}

void InputEncoder::normalize(HostBatch& b) const {
  if (normalization_.empty()) return;
  const int64_t channels = channel_count(sample_shape_);
  const size_t numel = static_cast<size_t>(mls::numel(sample_shape_));
  const size_t cs = numel / static_cast<size_t>(channels);
  for (size_t s = 0; s < static_cast<size_t>(b.size); ++s)
    for (int64_t c = 0; c < channels; ++c) {
      float* p = b.x.data() + s * numel + static_cast<size_t>(c) * cs;
      for (size_t k = 0; k < cs; ++k)
        p[k] = (p[k] - normalization_.mean_of(c)) / normalization_.std_of(c);
    }
}

Result<HostBatch> InputEncoder::encode_image(const std::vector<uint8_t>& bytes,
                                             const std::string& name) const {
  ImageDims d;
  if (csv_ || !image_dims(sample_shape_, d) || (d.c != 1 && d.c != 3))
    return make_error(name + ": this model takes samples of shape " + shape_str(sample_shape_) +
                      ", not images");
  auto im = decode_image_memory(bytes.data(), bytes.size(), static_cast<int>(d.c), name);
  if (!im) return im.error();
  const Image sized = resize_bilinear(*im, d.h, d.w);
  HostBatch b;
  b.size = 1;
  b.x.resize(sized.pixels.size());
  // Same arithmetic as the training lookup table: p / 255 in float, then normalised.
  for (size_t k = 0; k < b.x.size(); ++k) b.x[k] = static_cast<float>(sized.pixels[k]) / 255.0f;
  normalize(b);
  return b;
}

Result<HostBatch> InputEncoder::encode_npy(const std::vector<uint8_t>& bytes,
                                           const std::string& name) const {
  if (csv_) return make_error(name + ": this model was trained on CSV rows; give a CSV file");
  auto a = parse_npy(bytes, name);
  if (!a) return a.error();
  const int64_t per = mls::numel(sample_shape_);
  int64_t n = 0;
  if (a->numel() == per)
    n = 1;  // one sample, in the sample shape or any shape of the same size
  else if (!a->shape.empty() && a->shape[0] > 0 && a->numel() == a->shape[0] * per)
    n = a->shape[0];
  else
    return make_error(name + ": shape " + shape_str(a->shape) + " holds neither one sample of " +
                      shape_str(sample_shape_) + " nor a batch [N, ...] of them");
  HostBatch b;
  b.size = n;
  b.x = a->to_floats();
  if (a->dtype == NpyType::U8 && byte_features_)
    for (float& v : b.x) v = v / 255.0f;
  normalize(b);
  return b;
}

Result<HostBatch> InputEncoder::encode_csv(const std::vector<uint8_t>& bytes,
                                           const std::string& name) const {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text.find('\0') != std::string_view::npos)
    return make_error(name + ": not a PNG, JPEG, NPY or CSV file");
  auto t = parse_csv(text, name, delimiter_);
  if (!t) return t.error();
  HostBatch b;
  b.size = static_cast<int64_t>(t->rows.size());
  if (csv_) {
    if (auto r = csv_->encode(*t, name, b.x); !r) return r.error();
    normalize(b);
    return b;
  }
  const int64_t per = mls::numel(sample_shape_);
  if (static_cast<int64_t>(t->header.size()) != per)
    return make_error(name + ": " + std::to_string(t->header.size()) +
                      " columns, but this model takes " + std::to_string(per) +
                      " features a sample (one column each)");
  for (size_t r = 0; r < t->rows.size(); ++r)
    for (size_t c = 0; c < t->header.size(); ++c) {
      auto v = parse_number(t->rows[r][c]);
      if (!v)
        return make_error(name + ":" + std::to_string(t->lines[r]) + ": column '" + t->header[c] +
                          "': '" + t->rows[r][c] + "' is not a number");
      b.x.push_back(static_cast<float>(*v));
    }
  normalize(b);
  return b;
}

}  // namespace mls::data
