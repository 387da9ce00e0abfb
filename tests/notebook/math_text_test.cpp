// Inline math in Markdown cells as Unicode: the TeX reader, the $...$ spans outside code, and
// md4c's math spans in the HTML export.
#include <catch2/catch.hpp>

#include "scripting/notebook/math_text.h"

using mls::lua::html_math;
using mls::lua::markdown_math;
using mls::lua::tex_to_unicode;

TEST_CASE("TeX math reads as Unicode: letters, operators, scripts, fractions, roots, accents",
          "[notebook][math]") {
  CHECK(tex_to_unicode("\\sigma(x)^2") == "σ(x)²");
  CHECK(tex_to_unicode("\\alpha x + \\beta") == "αx + β");
  CHECK(tex_to_unicode("\\log p") == "log p");
  CHECK(tex_to_unicode("\\frac{1}{n}\\sum_{i=1}^n x_i^2") == "1/n∑ᵢ₌₁ⁿ xᵢ²");
  CHECK(tex_to_unicode("\\frac{a+b}{2}") == "(a+b)/2");
  CHECK(tex_to_unicode("W^\\top x + b") == "Wᵀx + b");
  CHECK(tex_to_unicode("\\hat{y} - y") == "y\u0302 − y");  // a combining hat
  CHECK(tex_to_unicode("\\sqrt{d_k}") == "√dₖ");
  CHECK(tex_to_unicode("\\sqrt[3]{x}") == "³√x");
  CHECK(tex_to_unicode("\\mathbb{R}^{n \\times m}") == "ℝ^(n × m)");
  CHECK(tex_to_unicode("\\mathcal{L} = -\\log p") == "ℒ = −log p");
  CHECK(tex_to_unicode("\\text{lr is } \\eta") == "lr is η");
  CHECK(tex_to_unicode("\\left( \\frac{\\partial L}{\\partial w} \\right)") == "(∂L/∂w)");
  CHECK(tex_to_unicode("x \\leq y \\neq z") == "x ≤ y ≠ z");
  // No small form for every letter: the whole script spelled out, not half raised.
  CHECK(tex_to_unicode("e^{qx}") == "e^(qx)");
  CHECK(tex_to_unicode("x_{\\text{batch}}") == "x_(batch)");
  // A command it does not know keeps its name.
  CHECK(tex_to_unicode("\\foo{x}") == "foox");
  // Unbalanced input ends without a crash.
  CHECK(tex_to_unicode("\\frac{a") == "a/");
  CHECK(tex_to_unicode("x^") == "x^");
  CHECK(tex_to_unicode("}{\\") == "\\");
}

TEST_CASE("Markdown math: $...$ and $$...$$ outside code become italic Unicode",
          "[notebook][math]") {
  CHECK(markdown_math("loss $\\hat{y}_i - y_i$ here") == "loss *y\u0302ᵢ − yᵢ* here");
  CHECK(markdown_math("$$\\sum_i w_i$$") == "*∑ᵢ wᵢ*");
  // Markdown's specials in the result are escaped, so they show as they are.
  CHECK(markdown_math("$a*b$") == "*a\\*b*");
  // Code spans and fenced blocks keep their dollars.
  CHECK(markdown_math("in `$x$` no") == "in `$x$` no");
  CHECK(markdown_math("```\n$x$\n```\n$y$") == "```\n$x$\n```\n*y*");
  // Money, an escaped dollar and a dollar before a space are not math.
  CHECK(markdown_math("costs $5 and $6 now") == "costs $5 and $6 now");
  CHECK(markdown_math("\\$x$") == "\\$x$");
  CHECK(markdown_math("a $ b $ c") == "a $ b $ c");
}

TEST_CASE("the HTML export's math spans are rendered, escaped", "[notebook][math]") {
  CHECK(html_math("<p>a <x-equation>x^2 &lt; 1</x-equation> b</p>") ==
        "<p>a <span class=\"math\">x² &lt; 1</span> b</p>");
  CHECK(html_math("<x-equation type=\"display\">\\alpha</x-equation>") ==
        "<div class=\"math\">α</div>");
  CHECK(html_math("<x-equation>unclosed") == "<x-equation>unclosed");
}
