// Colours for runs by a param's value (the run browser's "colour by"): a scale over its
// numbers (blue .. red, logarithmic where they span a decade or more) or one colour per
// distinct word; and the legend drawn beside the picker.
//
//   ParamColours c = param_colours("lr", {"0.001", "0.01", "0.1"});   // c.log
//   uint32_t rgb = c.colour("0.01");   // 0xRRGGBB, the middle of the scale
//   legend->set(c);                    // ColourLegend: the gradient with its ends
#pragma once

#include <QWidget>
#include <cstdint>
#include <string>
#include <vector>

namespace mls::editor {

struct ParamColours {
  std::string key;
  bool log = false, words = false;
  double min = 0, max = 0;
  std::vector<std::string> values;  // words: the distinct values, sorted
  // 0xRRGGBB for a run's value ("" a run without the param: grey).
  uint32_t colour(const std::string& value) const;
  std::string legend() const;  // "lr: blue 0.001 .. red 0.1 (log scale)"
};
ParamColours param_colours(const std::string& key, const std::vector<std::string>& values);

// The gradient (or the words' swatches) of the colour-by param, with its ends named.
class ColourLegend : public QWidget {
 public:
  explicit ColourLegend(QWidget* parent = nullptr);
  void set(const ParamColours& c);
  const ParamColours& colours() const { return colours_; }

 protected:
  void paintEvent(QPaintEvent*) override;

 private:
  ParamColours colours_;
};

}  // namespace mls::editor
