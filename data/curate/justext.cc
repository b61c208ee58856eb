#include "data/curate/justext.h"

#include <libxml/HTMLparser.h>
#include <libxml/tree.h>
#include <unicode/ucnv.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string_view>

#include "core/status.h"
#include "data/python_text.h"
#include "data/unicode_classes.h"

namespace mtnlg::curate {

namespace {

// jusText's PARAGRAPH_TAGS.
const std::set<std::string>& paragraph_tags() {
  static const std::set<std::string> tags = {
      "body", "blockquote", "caption",  "center",   "col",    "colgroup", "dd",     "div",
      "dl",   "dt",         "fieldset", "form",     "legend", "optgroup", "option", "p",
      "pre",  "table",      "td",       "textarea", "tfoot",  "th",       "thead",  "tr",
      "ul",   "li",         "h1",       "h2",       "h3",     "h4",       "h5",     "h6"};
  return tags;
}

// lxml.html.defs.block_tags (lxml.html.fromstring names a fragment's container by them).
bool block_tag(const std::string& t) {
  static const std::set<std::string> tags = {
      "address", "blockquote", "center",   "dir", "div", "dl",  "fieldset", "form",
      "h1",      "h2",         "h3",       "h4",  "h5",  "h6",  "hr",       "isindex",
      "menu",    "noframes",   "noscript", "ol",  "p",   "pre", "table",    "ul"};
  return tags.count(t) > 0;
}

std::string tag_of(const xmlNode* n) {
  return reinterpret_cast<const char*>(n->name);
}

// Python's str.isspace() over a UTF-8 string: true when all of it is whitespace (or empty).
bool is_blank(const std::u32string& s) {
  return std::all_of(s.begin(), s.end(), [](char32_t c) { return python_isspace(c); });
}

// re.sub(r"\s+", " ", s).
std::u32string normalize_whitespace(const std::u32string& s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (python_isspace(s[i])) {
      out.push_back(U' ');
      while (i < s.size() && python_isspace(s[i])) ++i;
    } else {
      out.push_back(s[i++]);
    }
  }
  return out;
}

std::u32string strip(const std::u32string& s) {
  size_t b = 0, e = s.size();
  while (b < e && python_isspace(s[b])) ++b;
  while (e > b && python_isspace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

struct Para {
  std::string dom_path;
  std::vector<std::u32string> nodes;
  int64_t chars_in_links = 0;
  std::u32string text() const {
    std::u32string all;
    for (const auto& n : nodes) all += n;
    return normalize_whitespace(strip(all));
  }
};

// jusText's ParagraphMaker, fed as lxml.sax.saxify feeds it.
class ParagraphMaker {
 public:
  std::vector<Para> paragraphs;
  ParagraphMaker() { start_new(); }
  void start_element(const std::string& name) {
    path_.push_back(name);
    if (paragraph_tags().count(name) || (name == "br" && br_)) {
      start_new();
    } else {
      br_ = name == "br";
      if (name == "a") link_ = true;
    }
  }
  void end_element(const std::string& name) {
    path_.pop_back();
    if (paragraph_tags().count(name)) start_new();
    if (name == "a") link_ = false;
  }
  void characters(const std::u32string& content) {
    if (is_blank(content)) return;
    std::u32string text = normalize_whitespace(content);
    if (link_) current_.chars_in_links += static_cast<int64_t>(text.size());
    current_.nodes.push_back(std::move(text));
    br_ = false;
  }
  void end_document() { start_new(); }

 private:
  void start_new() {
    if (!current_.nodes.empty()) paragraphs.push_back(std::move(current_));
    current_ = Para{};
    for (size_t i = 0; i < path_.size(); ++i) current_.dom_path += (i ? "." : "") + path_[i];
  }
  std::vector<std::string> path_;
  Para current_;
  bool link_ = false, br_ = false;
};

// Text and CDATA nodes in a row are one string, as lxml's .text and .tail are.
void walk(const xmlNode* parent, ParagraphMaker& pm) {
  std::string pending;
  const auto flush = [&] {
    if (!pending.empty()) pm.characters(utf8_to_u32(pending));
    pending.clear();
  };
  for (const xmlNode* n = parent->children; n != nullptr; n = n->next) {
    if (n->type == XML_TEXT_NODE || n->type == XML_CDATA_SECTION_NODE) {
      if (n->content != nullptr) pending += reinterpret_cast<const char*>(n->content);
    } else if (n->type == XML_ELEMENT_NODE) {
      flush();
      pm.start_element(tag_of(n));
      walk(n, pm);
      pm.end_element(tag_of(n));
    }
  }
  flush();
}

bool has_ancestor_in(const xmlNode* n, const std::set<std::string>& tags) {
  for (const xmlNode* p = n->parent; p != nullptr && p->type == XML_ELEMENT_NODE; p = p->parent)
    if (tags.count(tag_of(p))) return true;
  return false;
}

// jusText's lxml Cleaner options on the tree under root.
void clean(xmlNode* root) {
  static const std::set<std::string> kill = {"head",   "script", "style",  "applet",
                                             "button", "input",  "select", "textarea"};
  static const std::set<std::string> unwrap = {"iframe", "embed", "layer",
                                               "object", "param", "form"};
  std::vector<xmlNode*> nodes;
  const auto collect = [&](auto&& self, xmlNode* n) -> void {
    for (xmlNode* c = n->children; c != nullptr; c = c->next) {
      nodes.push_back(c);
      if (c->type == XML_ELEMENT_NODE) self(self, c);
    }
  };
  collect(collect, root);
  // <param> outside <applet> and <object> goes with its content; then comments, then the kill
  // tags (outermost ones: their insides go with them).
  std::vector<xmlNode*> dead;
  for (xmlNode* n : nodes) {
    if (n->type == XML_COMMENT_NODE) {
      dead.push_back(n);
    } else if (n->type == XML_ELEMENT_NODE) {
      const std::string t = tag_of(n);
      if ((kill.count(t) && !has_ancestor_in(n, kill)) ||
          (t == "param" && !has_ancestor_in(n, {"applet", "object"}) && !has_ancestor_in(n, kill)))
        dead.push_back(n);
    }
  }
  std::set<xmlNode*> gone;
  for (xmlNode* n : dead) {
    bool inside = false;
    for (xmlNode* p = n->parent; p != nullptr; p = p->parent) inside = inside || gone.count(p);
    if (inside) continue;
    gone.insert(n);
  }
  for (xmlNode* n : gone) {
    xmlUnlinkNode(n);
    xmlFreeNode(n);
  }
  // The unwrap tags: their children take their place.
  nodes.clear();
  collect(collect, root);
  for (xmlNode* n : nodes) {
    if (n->type != XML_ELEMENT_NODE || !unwrap.count(tag_of(n))) continue;
    while (n->children != nullptr) {
      xmlNode* c = n->children;
      xmlUnlinkNode(c);
      xmlAddPrevSibling(n, c);
    }
    xmlUnlinkNode(n);
    xmlFreeNode(n);
  }
}

struct DocFree {
  void operator()(xmlDoc* d) const { xmlFreeDoc(d); }
};

// The element lxml.html.fromstring returns for this document.
xmlNode* fromstring_root(xmlDoc* doc, const std::string& html) {
  xmlNode* root = xmlDocGetRootElement(doc);
  if (root == nullptr) return nullptr;
  size_t i = 0;
  while (i < html.size() && std::isspace(static_cast<unsigned char>(html[i]))) ++i;
  std::string head = html.substr(i, 9);
  std::transform(head.begin(), head.end(), head.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (head.rfind("<html", 0) == 0 || head.rfind("<!doctype", 0) == 0) return root;
  xmlNode* body = nullptr;
  for (xmlNode* c = root->children; c != nullptr; c = c->next) {
    if (c->type != XML_ELEMENT_NODE) continue;
    if (tag_of(c) == "head") return root;
    if (tag_of(c) == "body" && body == nullptr) body = c;
  }
  if (body == nullptr) return root;
  int elements = 0;
  xmlNode* only = nullptr;
  bool text = false;  // body.text or the last child's tail non-blank
  for (xmlNode* c = body->children; c != nullptr; c = c->next) {
    if (c->type == XML_ELEMENT_NODE) {
      ++elements;
      only = c;
    }
  }
  for (xmlNode* c = body->children; c != nullptr && c->type != XML_ELEMENT_NODE; c = c->next)
    if (c->type == XML_TEXT_NODE &&
        !is_blank(utf8_to_u32(reinterpret_cast<const char*>(c->content))))
      text = true;
  if (only != nullptr)
    for (xmlNode* c = only->next; c != nullptr; c = c->next)
      if (c->type == XML_TEXT_NODE &&
          !is_blank(utf8_to_u32(reinterpret_cast<const char*>(c->content))))
        text = true;
  if (elements == 1 && !text) return only;
  bool block = false;
  const auto scan = [&](auto&& self, const xmlNode* n) -> void {
    for (const xmlNode* c = n->children; c != nullptr && !block; c = c->next)
      if (c->type == XML_ELEMENT_NODE) {
        block = block || block_tag(tag_of(c));
        self(self, c);
      }
  };
  scan(scan, body);
  xmlNodeSetName(body, reinterpret_cast<const xmlChar*>(block ? "div" : "span"));
  return body;
}

// The first charset in a <meta ...charset=X> tag: jusText's
// <meta[^>]+charset=["']?([^'"/>\s]+), case-insensitive.
std::string meta_charset(const std::string& b) {
  std::string lower(b);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (size_t at = lower.find("<meta"); at != std::string::npos; at = lower.find("<meta", at + 1)) {
    const size_t open = at + 5;
    size_t end = lower.find('>', open);
    if (end == std::string::npos) end = lower.size();
    if (end == open) continue;  // [^>]+ needs a character
    // Greedy [^>]+ then backtracking: the last "charset=" that leaves a value.
    for (size_t c = end; c-- > open + 1;) {
      if (lower.compare(c, 8, "charset=") != 0) continue;
      size_t v = c + 8;
      if (v < lower.size() && (lower[v] == '"' || lower[v] == '\'')) ++v;
      size_t w = v;
      const auto stops = [](char ch) {
        return ch == '\'' || ch == '"' || ch == '/' || ch == '>' || ch == ' ' || ch == '\t' ||
               ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
      };
      while (w < lower.size() && !stops(lower[w])) ++w;
      if (w > v) return b.substr(v, w - v);  // (without the optional quote nothing matches)
    }
  }
  return "";
}

// `bytes` decoded from `charset` with U+FFFD for bad bytes; false if ICU does not know it.
bool convert(const std::string& bytes, const std::string& charset, std::string* out) {
  UErrorCode status = U_ZERO_ERROR;
  UConverter* cnv = ucnv_open(charset.c_str(), &status);
  if (U_FAILURE(status)) return false;
  std::unique_ptr<UConverter, decltype(&ucnv_close)> guard(cnv, &ucnv_close);
  std::u16string u(bytes.size() * 2 + 16, u'\0');
  const int32_t n =
      ucnv_toUChars(cnv, reinterpret_cast<UChar*>(u.data()), static_cast<int32_t>(u.size()),
                    bytes.data(), static_cast<int32_t>(bytes.size()), &status);
  if (U_FAILURE(status)) return false;
  u.resize(static_cast<size_t>(n));
  out->clear();
  for (size_t i = 0; i < u.size(); ++i) {
    char32_t c = u[i];
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < u.size() && u[i + 1] >= 0xDC00 &&
        u[i + 1] <= 0xDFFF) {
      c = 0x10000 + ((c - 0xD800) << 10) + (u[++i] - 0xDC00);
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      c = kReplacementChar;
    }
    append_utf8(c, *out);
  }
  return true;
}

}  // namespace

std::string decode_html(const std::string& bytes, const std::string& charset) {
  std::string out;
  if (!charset.empty() && convert(bytes, charset, &out)) return out;
  const std::string declared = meta_charset(bytes);
  if (!declared.empty() && convert(bytes, declared, &out)) return out;
  if (is_valid_utf8(bytes)) return bytes;
  return replace_invalid_utf8(bytes);
}

extern const char kJustextEnglishStoplist[];  // generated from stoplists/English.txt

std::unordered_set<std::string> parse_stoplist(std::string_view text) {
  // As jusText's get_stoplist: a word a line, lower-cased (Python's str.lower); a line's
  // trailing spaces and carriage return are dropped (no word of str.split() could hold them).
  std::unordered_set<std::string> words;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = std::min(text.find('\n', at), text.size());
    std::string_view w = text.substr(at, nl - at);
    while (!w.empty() && (w.back() == '\r' || w.back() == ' ')) w.remove_suffix(1);
    if (!w.empty()) words.insert(u32_to_utf8(python_lower(utf8_to_u32(std::string(w)))));
    at = nl + 1;
  }
  return words;
}

const std::unordered_set<std::string>& english_stoplist() {
  static const std::unordered_set<std::string> words = parse_stoplist(kJustextEnglishStoplist);
  return words;
}

std::unordered_set<std::string> read_stoplist(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw not_found("cannot open the stop-word list", path);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw io_error("cannot read the stop-word list", path);
  const std::string bytes = text.str();
  if (!is_valid_utf8(bytes))
    throw corruption("the stop-word list is not valid UTF-8 (jusText reads its lists as UTF-8)",
                     path);
  std::unordered_set<std::string> words = parse_stoplist(bytes);
  if (words.empty())
    throw invalid_argument("the stop-word list holds no word (give one word a line)", path);
  return words;
}

std::vector<JustextParagraph> justext(const std::string& utf8_html,
                                      const std::unordered_set<std::string>& stoplist,
                                      const JustextOptions& o) {
  std::vector<JustextParagraph> out;
  if (utf8_html.empty()) return out;
  std::unique_ptr<xmlDoc, DocFree> doc(
      htmlReadMemory(utf8_html.data(), static_cast<int>(utf8_html.size()), nullptr, "UTF-8",
                     HTML_PARSE_RECOVER | HTML_PARSE_NONET | HTML_PARSE_COMPACT |
                         HTML_PARSE_NOERROR | HTML_PARSE_NOWARNING));
  if (!doc) return out;
  xmlNode* root = fromstring_root(doc.get(), utf8_html);
  if (root == nullptr) return out;
  clean(root);
  ParagraphMaker pm;
  pm.start_element(tag_of(root));
  walk(root, pm);
  pm.end_element(tag_of(root));
  pm.end_document();

  // Context-free classes.
  for (const Para& p : pm.paragraphs) {
    JustextParagraph jp;
    const std::u32string text = p.text();
    jp.text = u32_to_utf8(text);
    jp.dom_path = p.dom_path;
    jp.chars_in_links = p.chars_in_links;
    const auto length = static_cast<int64_t>(text.size());
    int64_t words = 0, stop = 0;
    for (size_t i = 0; i < text.size();) {
      while (i < text.size() && python_isspace(text[i])) ++i;
      if (i == text.size()) break;
      size_t j = i;
      while (j < text.size() && !python_isspace(text[j])) ++j;
      ++words;
      stop += stoplist.count(u32_to_utf8(python_lower(text.substr(i, j - i)))) > 0;
      i = j;
    }
    const double stop_density = words == 0 ? 0.0 : static_cast<double>(stop) / words;
    const double link_density = length == 0 ? 0.0 : static_cast<double>(p.chars_in_links) / length;
    // \bh\d\b: a tag of the path that is h and one digit.
    bool heading = false;
    for (size_t at = 0; at <= jp.dom_path.size();) {
      const size_t dot = std::min(jp.dom_path.find('.', at), jp.dom_path.size());
      const std::string t = jp.dom_path.substr(at, dot - at);
      heading = heading ||
                (t.size() == 2 && t[0] == 'h' && std::isdigit(static_cast<unsigned char>(t[1])));
      at = dot + 1;
    }
    jp.heading = !o.no_headings && heading;
    const bool select =
        jp.dom_path.rfind("select", 0) == 0 || jp.dom_path.find(".select") != std::string::npos;
    if (link_density > o.max_link_density) {
      jp.cf_class = "bad";
    } else if (jp.text.find("\xc2\xa9") != std::string::npos ||
               jp.text.find("&copy") != std::string::npos) {
      jp.cf_class = "bad";
    } else if (select) {
      jp.cf_class = "bad";
    } else if (length < o.length_low) {
      jp.cf_class = p.chars_in_links > 0 ? "bad" : "short";
    } else if (stop_density >= o.stopwords_high) {
      jp.cf_class = length > o.length_high ? "good" : "neargood";
    } else if (stop_density >= o.stopwords_low) {
      jp.cf_class = "neargood";
    } else {
      jp.cf_class = "bad";
    }
    jp.class_type = jp.cf_class;
    out.push_back(std::move(jp));
  }

  // Context-sensitive revision (jusText's revise_paragraph_classification).
  const auto n = static_cast<int64_t>(out.size());
  const auto length_of = [&](int64_t i) {
    return static_cast<int64_t>(utf8_to_u32(out[static_cast<size_t>(i)].text).size());
  };
  const auto cls = [&](int64_t i) -> std::string& {
    return out[static_cast<size_t>(i)].class_type;
  };
  const auto neighbour = [&](int64_t i, bool ignore_neargood, int64_t inc, int64_t boundary) {
    while (i + inc != boundary) {
      i += inc;
      const std::string& c = cls(i);
      if (c == "good" || c == "bad") return c;
      if (c == "neargood" && !ignore_neargood) return c;
    }
    return std::string("bad");
  };
  const auto prev = [&](int64_t i, bool ign) { return neighbour(i, ign, -1, -1); };
  const auto next = [&](int64_t i, bool ign) { return neighbour(i, ign, 1, n); };
  const auto heading_pass = [&](const std::string& from, const std::string& to, bool need_cf) {
    for (int64_t i = 0; i < n; ++i) {
      JustextParagraph& p = out[static_cast<size_t>(i)];
      if (!(p.heading && p.class_type == from && (!need_cf || p.cf_class != "bad"))) continue;
      int64_t distance = 0;
      for (int64_t j = i + 1; j < n && distance <= o.max_heading_distance; ++j) {
        if (cls(j) == "good") {
          p.class_type = to;
          break;
        }
        distance += length_of(j);
      }
    }
  };
  heading_pass("short", "neargood", false);
  std::vector<std::pair<int64_t, std::string>> changes;
  for (int64_t i = 0; i < n; ++i) {
    if (cls(i) != "short") continue;
    const std::string p = prev(i, true), q = next(i, true);
    if (p == "good" && q == "good") {
      changes.emplace_back(i, "good");
    } else if (p == "bad" && q == "bad") {
      changes.emplace_back(i, "bad");
    } else if ((p == "bad" && prev(i, false) == "neargood") ||
               (q == "bad" && next(i, false) == "neargood")) {
      changes.emplace_back(i, "good");
    } else {
      changes.emplace_back(i, "bad");
    }
  }
  for (const auto& [i, c] : changes) cls(i) = c;
  for (int64_t i = 0; i < n; ++i) {
    if (cls(i) != "neargood") continue;
    cls(i) = prev(i, true) == "bad" && next(i, true) == "bad" ? "bad" : "good";
  }
  heading_pass("bad", "good", true);
  return out;
}

}  // namespace mtnlg::curate
