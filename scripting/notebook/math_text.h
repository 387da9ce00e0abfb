// Inline math in Markdown cells, written as TeX between dollars ($\sigma(x)^2$, $$\sum_i x_i$$),
// shown as Unicode text (σ(x)², ∑ᵢ xᵢ). No Qt and no network: the GUI's Markdown (Qt's own)
// and the HTML export (md4c's math spans) both go through it, so they read the same. It covers
// what notebooks on ML write: Greek letters, operators and relations, sub- and superscripts,
// \frac, \sqrt, accents, \text and font commands, \mathbb letters. A command it does not know
// is kept as its name (\foo -> foo), never dropped.
//
//   tex_to_unicode("\\frac{1}{n}\\sum_{i=1}^n x_i^2")   // "1/n ∑ᵢ₌₁ⁿ xᵢ²"
//   markdown_math("loss $\\hat{y} - y$ in `$code$`")     // "loss *ŷ − y* in `$code$`"
//   html_math("<p><x-equation>a^2</x-equation></p>")    // "<p><span class=\"math\">a²</span></p>"
#pragma once

#include <string>
#include <string_view>

namespace mls::lua {

// TeX math (the text between the dollars) as Unicode.
std::string tex_to_unicode(std::string_view tex);

// Markdown with each $...$ and $$...$$ outside code (spans and fenced or indented blocks)
// replaced by its Unicode form in italics (Markdown's own specials escaped). A dollar
// followed by a space or a digit-only amount ("costs $5 and $6") is not math, as in md4c.
std::string markdown_math(std::string_view md);

// md4c's HTML (MD_FLAG_LATEXMATHSPANS) with each <x-equation> span rendered:
// <span class="math"> inline, <div class="math"> for display math.
std::string html_math(std::string_view html);

}  // namespace mls::lua
