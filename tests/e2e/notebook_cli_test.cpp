// `mlstudio notebook run|check|export` on the example notebooks and on small hand-made ones.
#include <fstream>
#include <regex>

#include <stb_image.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cli_util.h"

using namespace mls::e2e;

namespace {

fs::path notebook_dir(const std::string& name) {
  fs::path d = temp_dir() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A copy of an example notebook in a scratch folder (its outputs are written beside it).
std::string copy_example(const std::string& file, const fs::path& dir) {
  const fs::path to = dir / file;
  fs::copy_file(fs::path(MLS_SOURCE_DIR) / "resources/examples" / file, to,
                fs::copy_options::overwrite_existing);
  return to.string();
}

// A project (the two-spirals MLP) with these cells: {kind, id, source}.
std::string write_notebook(const fs::path& dir,
                           const std::vector<std::array<std::string, 3>>& cells) {
  auto doc = nlohmann::json::parse(
      read_file(std::string(MLS_SOURCE_DIR) + "/resources/examples/two-spirals-mlp.mls"));
  doc["notebook"]["cells"] = nlohmann::json::array();
  for (const auto& [kind, id, source] : cells)
    doc["notebook"]["cells"].push_back({{"id", id}, {"kind", kind}, {"source", source}});
  const fs::path p = dir / "nb.mls";
  std::ofstream(p) << doc.dump(2);
  return p.string();
}

}  // namespace

TEST_CASE("notebook run and check pass on every example notebook", "[e2e][notebook]") {
  std::vector<std::string> examples;
  for (const auto& e : fs::directory_iterator(fs::path(MLS_SOURCE_DIR) / "resources/examples")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("notebook-", 0) == 0 && e.path().extension() == ".mls") examples.push_back(name);
  }
  std::sort(examples.begin(), examples.end());
  REQUIRE(examples.size() >= 3);
  const fs::path dir = notebook_dir("examples");
  for (const auto& name : examples) {
    INFO(name);
    const std::string p = copy_example(name, dir);
    Output run_out = run("notebook run " + p + " --db " + (dir / "runs.db").string(), 120);
    INFO(run_out.out << run_out.err);
    REQUIRE(run_out.code == 0);
    CHECK(run_out.out.find("outputs saved to") != std::string::npos);
    const std::string outputs = p.substr(0, p.size() - 4) + ".outputs.json";
    REQUIRE(fs::exists(outputs));
    auto saved = nlohmann::json::parse(read_file(outputs));
    CHECK(saved["format"] == 1);
    CHECK(!saved["cells"].empty());
    Output check = run("notebook check " + p + " --db " + (dir / "runs.db").string(), 120);
    INFO(check.out << check.err);
    CHECK(check.code == 0);
    CHECK(check.out.find("same") != std::string::npos);
  }
}

TEST_CASE("notebook run --param moves the training notebook's learning-rate slider",
          "[e2e][notebook]") {
  const fs::path dir = notebook_dir("train");
  const std::string p = copy_example("notebook-train-mlp.mls", dir);
  Output o = run("notebook run " + p + " --param lr=0.1 --db " + (dir / "runs.db").string(), 120);
  INFO(o.out << o.err);
  REQUIRE(o.code == 0);
  auto saved = nlohmann::json::parse(read_file((dir / "notebook-train-mlp.outputs.json").string()));
  CHECK(saved["cells"]["settings"]["widgets"][0]["value"] == 0.1);
  CHECK(saved["cells"]["train"]["text"].get<std::string>().find(
            "trained 1 epoch at lr 0.100: test accuracy") == 0);
}

TEST_CASE("notebook export writes an HTML page and a Lua script that runs alone",
          "[e2e][notebook]") {
  const fs::path dir = notebook_dir("export");
  const std::string p = copy_example("notebook-tour.mls", dir);
  const std::string figures = (dir / "figs").string();
  const std::string run_html = (dir / "run.html").string();
  REQUIRE(run("notebook run " + p + " --figures " + figures + " --html " + run_html, 60).code == 0);
  CHECK(read_file(run_html).find("<h2>A function and its gradient</h2>") != std::string::npos);
  CHECK(read_file(figures + "/grad-1.svg").find("<svg") != std::string::npos);
  CHECK(read_file(figures + "/matrix-1.svg").find("<svg") != std::string::npos);
  CHECK_FALSE(fs::exists(figures + "/grid-1.svg"));  // the grid cell plots nothing
  const std::string html = (dir / "tour.html").string();
  Output o = run("notebook export " + p + " --html " + html, 60);
  INFO(o.err);
  REQUIRE(o.code == 0);
  const std::string page = read_file(html);
  CHECK(page.find("<h1>A tour of tensors and autograd</h1>") != std::string::npos);
  CHECK(page.find("<svg") != std::string::npos);
  CHECK(page.find("<style>") != std::string::npos);
  CHECK(page.find("out stale") == std::string::npos);  // just run: nothing is stale
  // A plot's title once: drawn in its SVG, not again as a caption.
  CHECK(page.find("<figcaption>") == std::string::npos);
  CHECK(page.find(">(M + Mt) / 2<") != std::string::npos);

  const std::string lua = (dir / "tour.lua").string();
  REQUIRE(run("notebook export " + p + " --lua " + lua, 60).code == 0);
  const std::string script = read_file(lua);
  CHECK(script.find("-- # A tour of tensors and autograd") != std::string::npos);
  CHECK(script.find("-- [cell grid]") < script.find("-- [cell grad]"));
  Output ran = run("lua " + lua, 60);
  INFO(ran.err);
  CHECK(ran.code == 0);
  CHECK(ran.out.find("largest error of the gradient") != std::string::npos);

  // An edit of a cell's code makes its saved output, and its readers', stale in the export.
  std::string text = read_file(p);
  text = std::regex_replace(text, std::regex("n = 101"), "n = 51");
  std::ofstream(p) << text;
  REQUIRE(run("notebook export " + p + " --html " + html, 60).code == 0);
  const std::string stale_page = read_file(html);
  size_t stale = 0;
  for (size_t at = stale_page.find("out stale"); at != std::string::npos;
       at = stale_page.find("out stale", at + 1))
    ++stale;
  CHECK(stale == 2);  // grid, and grad which reads xs; matrix reads neither

  Output bad = run("notebook export " + p + " --html " + (dir / "no/such/dir/x.html").string(), 60);
  CHECK(bad.code == 1);
  CHECK(bad.err.find("no/such/dir/x.html") != std::string::npos);
}

TEST_CASE("notebook run: --param, an error cell, bad inputs", "[e2e][notebook]") {
  const fs::path dir = notebook_dir("params");
  const std::string p = write_notebook(
      dir, {{"markdown", "intro", "# Params"},
            {"lua", "knob", "k = mls.ui.slider(\"k\", {min = 0, max = 10, value = 2})"},
            {"lua", "show", "print(\"k is\", k, \"scale is\", scale)"}});
  Output o = run("notebook run " + p + " --param k=7 --param scale=hello", 60);
  INFO(o.out << o.err);
  REQUIRE(o.code == 0);
  CHECK(o.out.find("knob") != std::string::npos);
  auto saved = nlohmann::json::parse(read_file((dir / "nb.outputs.json").string()));
  CHECK(saved["cells"]["show"]["text"] == "k is\t7.0\tscale is\thello\n");

  // A changed saved output makes check fail, naming the cell.
  saved["cells"]["show"]["text"] = "k is\t8.0\tscale is\thello\n";
  std::ofstream(dir / "nb.outputs.json") << saved.dump();
  Output check = run("notebook check " + p + " --param k=7 --param scale=hello", 60);
  CHECK(check.code == 1);
  CHECK(check.out.find("cell show differs") != std::string::npos);
  CHECK(check.out.find("k is\t8.0") != std::string::npos);
  // Within the tolerance it is the same.
  saved["cells"]["show"]["text"] = "k is\t7.0000001\tscale is\thello\n";
  std::ofstream(dir / "nb.outputs.json") << saved.dump();
  CHECK(run("notebook check " + p + " --param k=7 --param scale=hello", 60).code == 0);
  CHECK(run("notebook check " + p + " --tolerance 1e-9 --param k=7 --param scale=hello", 60).code ==
        1);

  // A broken outputs file is named.
  std::ofstream(dir / "nb.outputs.json") << "{\"format\": 1, \"cells\": ";
  Output broken = run("notebook check " + p, 60);
  CHECK(broken.code == 1);
  CHECK(broken.err.find("nb.outputs.json") != std::string::npos);

  const std::string e = write_notebook(
      dir, {{"lua", "data", "x = 1\ny = 2\nz = nil + x"}, {"lua", "after", "print(x)"}});
  Output err = run("notebook run " + e, 60);
  CHECK(err.code == 1);
  CHECK(err.err.find("nb.mls: cell data:3: attempt to perform arithmetic") != std::string::npos);

  // Sandboxed unless --trust: a cell may not write outside the project's folder.
  const std::string outside = (temp_dir() / "outside.txt").string();
  const std::string w = write_notebook(
      dir, {{"lua", "w",
             "local f = assert(io.open(\"" + outside + "\", \"w\"))\nf:write(\"x\")\nf:close()"}});
  Output boxed = run("notebook run " + w, 60);
  CHECK(boxed.code == 1);
  CHECK(boxed.err.find("sandbox:") != std::string::npos);
  CHECK(boxed.err.find("cell w:1:") != std::string::npos);
  CHECK_FALSE(fs::exists(outside));
  Output trusted = run("notebook run " + w + " --trust", 60);
  CHECK(trusted.code == 0);
  CHECK(fs::exists(outside));

  fs::remove(dir / "nb.outputs.json");
  Output none = run("notebook check " + e, 60);
  CHECK(none.code == 1);
  CHECK(none.err.find("has no saved outputs") != std::string::npos);

  Output missing = run("notebook run " + (dir / "missing.mls").string(), 60);
  CHECK(missing.code == 1);
  CHECK(missing.err.find("missing.mls") != std::string::npos);

  Output empty =
      run("notebook run " + std::string(MLS_SOURCE_DIR) + "/resources/examples/two-spirals-mlp.mls",
          60);
  CHECK(empty.code == 1);
  CHECK(empty.err.find("two-spirals-mlp.mls has no notebook cells") != std::string::npos);
}

TEST_CASE("notebook run stops at the first failed cell, the cells before it keep their outputs",
          "[e2e][notebook]") {
  const fs::path dir = notebook_dir("first_error");
  const std::string p = write_notebook(dir, {{"lua", "setup", "a = 1\nprint(\"setup ran\")"},
                                             {"lua", "data", "x = a\ny = 2\nz = nil + x"},
                                             {"lua", "other", "print(\"other ran\")"},
                                             {"lua", "after", "print(x)"}});
  Output o = run("notebook run " + p, 60);
  INFO(o.out << o.err);
  CHECK(o.code == 1);
  CHECK(o.err.find("nb.mls: cell data:3: attempt to perform arithmetic") != std::string::npos);
  CHECK(o.err.find("(stopped: 2 later cells not run)") != std::string::npos);
  CHECK(o.out.find("other") == std::string::npos);  // no line: it never started
  auto saved = nlohmann::json::parse(read_file((dir / "nb.outputs.json").string()));
  CHECK(saved["cells"]["setup"]["text"] == "setup ran\n");
  CHECK(saved["cells"]["data"]["ok"] == false);
  CHECK(saved["cells"]["data"]["error_line"] == 3);
  CHECK_FALSE(saved["cells"].contains("other"));
  CHECK_FALSE(saved["cells"].contains("after"));
  // check runs the same way: the same cells ran, the same error: the same.
  Output check = run("notebook check " + p, 60);
  INFO(check.out << check.err);
  CHECK(check.code == 0);
}

TEST_CASE("notebook run: a cell assigning a --param name is warned about, the parameter wins",
          "[e2e][notebook]") {
  const fs::path dir = notebook_dir("param_wins");
  const std::string p = write_notebook(
      dir, {{"lua", "setup", "scale = 3\nprint(\"setup\", scale)"},
            {"lua", "knob", "k = mls.ui.slider(\"k\", {min = 0, max = 10, value = 2})"},
            {"lua", "use", "print(\"use\", scale, k)"}});
  Output o = run("notebook run " + p + " --param scale=5 --param k=7", 60);
  INFO(o.out << o.err);
  REQUIRE(o.code == 0);
  CHECK(o.err.find(
            "warning: cell setup assigns scale; --param scale=5 wins for the cells after it") !=
        std::string::npos);
  CHECK(o.err.find("cell knob") == std::string::npos);  // the slider took the parameter
  auto saved = nlohmann::json::parse(read_file((dir / "nb.outputs.json").string()));
  CHECK(saved["cells"]["setup"]["text"] == "setup\t3\n");
  CHECK(saved["cells"]["use"]["text"] == "use\t5\t7.0\n");
  // Without the parameter the cell's value stands, and nothing is said.
  Output plain = run("notebook run " + p, 60);
  CHECK(plain.code == 0);
  CHECK(plain.err.find("warning") == std::string::npos);
  saved = nlohmann::json::parse(read_file((dir / "nb.outputs.json").string()));
  CHECK(saved["cells"]["use"]["text"] == "use\t3\t2.0\n");
}

TEST_CASE("notebook run --figures DIR --png writes each figure as a PNG at the SVG's size",
          "[e2e][notebook]") {
  const fs::path dir = notebook_dir("png");
  const std::string p = copy_example("notebook-tour.mls", dir);
  const fs::path figs = dir / "figs";
  Output o = run("notebook run " + p + " --figures " + figs.string() + " --png", 60);
  INFO(o.out << o.err);
  REQUIRE(o.code == 0);
  for (const char* name : {"grad-1", "matrix-1"}) {
    INFO(name);
    const std::string svg = read_file((figs / (std::string(name) + ".svg")).string());
    std::smatch m;
    REQUIRE(std::regex_search(svg, m, std::regex("<svg[^>]* width=\"(\\d+)\" height=\"(\\d+)\"")));
    const int sw = std::stoi(m[1]), sh = std::stoi(m[2]);
    int w = 0, h = 0, n = 0;
    unsigned char* px =
        stbi_load((figs / (std::string(name) + ".png")).string().c_str(), &w, &h, &n, 3);
    REQUIRE(px != nullptr);
    CHECK(w == sw);
    CHECK(h == sh);
    // Not blank: the curves, axes and text are drawn (a few percent of the pixels at least).
    size_t ink = 0, total = static_cast<size_t>(w) * static_cast<size_t>(h);
    for (size_t i = 0; i < total; ++i)
      if (px[3 * i] < 200 || px[3 * i + 1] < 200 || px[3 * i + 2] < 200) ++ink;
    stbi_image_free(px);
    CHECK(ink > total / 50);
    CHECK(ink < total / 2 + total / 4);
  }
  // Without --figures, --png is refused by the command line.
  Output bad = run("notebook run " + p + " --png", 60);
  CHECK(bad.code != 0);
  CHECK(bad.err.find("--figures") != std::string::npos);
}

TEST_CASE("notebook export --html embeds Markdown's images from the project's folder, only those",
          "[e2e][notebook]") {
  const fs::path dir = notebook_dir("export_images");
  fs::create_directories(dir / "img");
  // A 1x1 PNG (the bytes of a real file) in the project's folder, another outside it.
  const std::string png = std::string("\x89PNG\r\n\x1a\n", 8) + "not really decoded";
  std::ofstream(dir / "img" / "a b.png", std::ios::binary) << png;
  const fs::path outside = temp_dir() / "outside-secret.png";
  std::ofstream(outside, std::ios::binary) << png;
  const std::string p = write_notebook(
      dir, {{"markdown", "intro",
             "| op | grad |\n|---|---|\n| tanh | 1 - tanh^2 |\n\n![here](img/a%20b.png) "
             "![web](https://example.org/x.png) ![out](../outside-secret.png) "
             "![missing](img/none.png)"},
            {"lua", "c", "print(1)"}});
  const std::string html = (dir / "page.html").string();
  Output o = run("notebook export " + p + " --html " + html, 60);
  INFO(o.err);
  REQUIRE(o.code == 0);
  const std::string page = read_file(html);
  CHECK(page.find("<table>") != std::string::npos);
  CHECK(page.find("<td>tanh</td>") != std::string::npos);
  // base64 of the 8 signature bytes and the text after them starts so:
  CHECK(page.find("<img src=\"data:image/png;base64,iVBORw0KGgpub3QgcmVhbGx5") !=
        std::string::npos);
  CHECK(page.find("src=\"https://example.org/x.png\"") != std::string::npos);
  CHECK(page.find("src=\"../outside-secret.png\"") != std::string::npos);  // not read
  CHECK(page.find("src=\"img/none.png\"") != std::string::npos);
}

TEST_CASE("a cell ending in a bare expression shows it: run, the HTML export, and a Lua export "
          "that prints it",
          "[e2e][notebook]") {
  const fs::path dir = notebook_dir("bare");
  const std::string p = write_notebook(
      dir, {{"lua", "a", "x = 6 * 7"}, {"lua", "b", "-- twice\nx * 2 -- the answer, doubled"}});
  Output o = run("notebook run " + p, 60);
  INFO(o.out << o.err);
  REQUIRE(o.code == 0);
  const auto saved = nlohmann::json::parse(read_file((dir / "nb.outputs.json").string()));
  CHECK(saved["cells"]["b"]["text"] == "84\n");
  // The export finds the cell's inputs (x), so its saved output is not shown stale.
  const std::string html = (dir / "nb.html").string();
  REQUIRE(run("notebook export " + p + " --html " + html, 60).code == 0);
  CHECK(read_file(html).find("out stale") == std::string::npos);
  const std::string lua = (dir / "nb.lua").string();
  o = run("notebook export " + p + " --lua " + lua, 60);
  INFO(o.err);
  REQUIRE(o.code == 0);
  o = run("lua " + lua, 60);
  INFO(o.err);
  CHECK(o.code == 0);
  CHECK(o.out == "84\n");
}

TEST_CASE("notebook run: a cell printing bytes that are not UTF-8 saves its outputs",
          "[e2e][notebook][hostile]") {
  // A student's print of any bytes: saving the outputs threw nlohmann's type_error 316 and
  // notebook run failed with exit 1, the outputs lost.
  const fs::path dir = notebook_dir("not_utf8");
  const std::string p = write_notebook(
      dir, {{"lua", "bytes", "print(\"bytes \" .. string.char(255, 194, 155) .. \" end\")"}});
  Output o = run("notebook run " + p, 60);
  INFO(o.out << o.err);
  CHECK(o.code == 0);
  auto saved = nlohmann::json::parse(read_file((dir / "nb.outputs.json").string()));
  // 0xFF reads as U+FFFD; the C1 control (C2 9B) is valid UTF-8 and kept.
  CHECK(saved["cells"]["bytes"]["text"] == "bytes \xef\xbf\xbd\xc2\x9b end\n");
}
