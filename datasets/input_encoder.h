// Turns a user's file into model inputs exactly as the training data was prepared: same
// image size and channels, same normalisation, same CSV columns, categories and scales.
// For `mlstudio predict P.mls --run ID --input FILE`.
//
//   Result<DatasetSplits> s = open_dataset(spec, base_dir, seed);
//   Result<HostBatch> in = s->encoder->encode("shoe.png");   // or rows.csv, batch.npy
//   if (!in) { std::cerr << in.error().message << "\n"; return 1; }
//   in->size == 1;  in->x.size() == 784;   // y and t stay empty
//
// What it accepts, told apart by content, not name:
//   PNG or JPEG  for models over [C, H, W] samples with C = 1 or 3: decoded to C channels,
//                resized bilinearly, read as byte / 255 (the units of every image source)
//   NPY          one sample (the sample shape, or any shape of that size) or a batch
//                [N, ...sample]; |u1 values read as byte / 255 when training features were bytes
//   CSV          with a header: the training feature columns, looked up by name, for a
//                CSV-trained model (the target column may be there; it is ignored); otherwise
//                one numeric column per feature
#pragma once

#include <optional>
#include <string>

#include "datasets/csv_dataset.h"
#include "datasets/transforms.h"
#include "engine/core/result.h"
#include "engine/train/data_source.h"

namespace mls::data {

class InputEncoder {
 public:
  // For array and image data: samples of `sample_shape`, stored as bytes / 255 when
  // `byte_features`, then normalised.
  InputEncoder(Shape sample_shape, bool byte_features, Normalization normalization);
  // For a CSV-trained model (normalisation: a normalize transform on top of the encoding).
  InputEncoder(CsvEncoding csv, char delimiter, Normalization normalization = {});

  Result<HostBatch> encode(const std::string& file) const;
  // The same from bytes in memory; `name` starts the messages.
  Result<HostBatch> encode_bytes(const std::vector<uint8_t>& bytes, const std::string& name) const;

  const Shape& sample_shape() const { return sample_shape_; }
  const Normalization& normalization() const { return normalization_; }
  bool byte_features() const { return byte_features_; }  // samples were bytes / 255
  const std::optional<CsvEncoding>& csv() const { return csv_; }

 private:
  Result<HostBatch> encode_image(const std::vector<uint8_t>& bytes, const std::string& name) const;
  Result<HostBatch> encode_npy(const std::vector<uint8_t>& bytes, const std::string& name) const;
  Result<HostBatch> encode_csv(const std::vector<uint8_t>& bytes, const std::string& name) const;
  void normalize(HostBatch& b) const;

  Shape sample_shape_;
  bool byte_features_ = false;
  Normalization normalization_;
  std::optional<CsvEncoding> csv_;
  char delimiter_ = ',';
};

}  // namespace mls::data
