// Human and JSON renderings of a Verdict (oracle/compare.h).
#include <cmath>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "oracle/compare.h"

namespace msa {
namespace {

std::string Number(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

std::string Where(const Mismatch& m) {
  std::string text = "seq " + std::to_string(m.sequence) + " query " + std::to_string(m.query) + " (row " +
                     std::to_string(m.row) + ")";
  if (m.head >= 0) text += " head " + std::to_string(m.head);
  if (m.index >= 0) text += " dim " + std::to_string(m.index);
  return text;
}

std::string Values(const Mismatch& m, Precision precision) {
  char text[160];
  std::snprintf(text, sizeof(text), "got %.17g expected %.17g (%s ulp %s)", m.got, m.expected, Number(m.ulps).c_str(),
                std::string(PrecisionName(precision)).c_str());
  return text;
}

// JSON has no infinity: spell it.
nlohmann::ordered_json FiniteOrText(double value) {
  return std::isfinite(value) ? nlohmann::ordered_json(value) : nlohmann::ordered_json(Number(value));
}

nlohmann::ordered_json MismatchJson(const Mismatch& m) {
  nlohmann::ordered_json json{{"sequence", m.sequence}, {"query", m.query}, {"row", m.row}, {"head", m.head}};
  if (m.index >= 0) json["index"] = m.index;
  if (m.why.empty()) {
    json["got"] = FiniteOrText(m.got);
    json["expected"] = FiniteOrText(m.expected);
    json["ulps"] = FiniteOrText(m.ulps);
  } else {
    json["why"] = m.why;
  }
  return json;
}

}  // namespace

std::string FormatVerdict(const Verdict& verdict) {
  std::string text;
  const std::string precision(PrecisionName(verdict.precision));
  text += verdict.exact_bits ? "rules: exact (bit-identical to the FP64 canonical reference)\n"
                             : "rules: " + precision + " (|got - ref| <= 2 * max|naive " + precision +
                                   " - ref| + 1 ulp at max|ref|; selection within tau)\n";
  const SelectionVerdict& s = verdict.selection;
  if (s.judged) {
    text += std::string("  selection  ") + (s.passed ? "PASS" : "FAIL") + "  " + std::to_string(s.rows) + " rows: " +
            std::to_string(s.identical_rows) + " identical, " + std::to_string(s.near_tie_rows) +
            " near-tie flip(s) within tau = " + Number(s.tau) + ", " + std::to_string(s.violation_rows) + " violations, " +
            std::to_string(s.invalid_rows) + " invalid\n";
    for (const Mismatch& m : s.listed) text += "      group " + std::to_string(m.head) + " " + Where(m) + ": " + m.why + "\n";
  } else {
    text += "  selection  not supplied\n";
  }
  for (const TensorVerdict& t : verdict.tensors) {
    char line[512];
    std::snprintf(line, sizeof(line), "  %-9s  %s  max error %s (bound %s, naive %s), nmse %s, rel L2 %s, %lld of %lld over",
                  t.name.c_str(), t.passed ? "PASS" : "FAIL", Number(t.max_error).c_str(), Number(t.bound).c_str(),
                  Number(t.naive_error).c_str(), Number(t.nmse).c_str(), Number(t.relative_l2).c_str(),
                  static_cast<long long>(t.mismatches), static_cast<long long>(t.elements));
    text += line;
    if (t.one_sided_nonfinite > 0) text += ", " + std::to_string(t.one_sided_nonfinite) + " one-sided NaN/Inf";
    text += "\n";
    if (t.worst.row >= 0) text += "      worst: " + Where(t.worst) + ": " + Values(t.worst, t.ulp_precision) + "\n";
    for (const Mismatch& m : t.listed) text += "      over:  " + Where(m) + ": " + Values(m, t.ulp_precision) + "\n";
  }
  if (!verdict.tensors.empty()) text += "  attention judged on the " + verdict.attention_selection + " selection\n";
  text += std::string("RESULT: ") + (verdict.passed() ? "PASS" : "FAIL") + "\n";
  return text;
}

std::string VerdictToJson(const Verdict& verdict) {
  nlohmann::ordered_json json;
  json["passed"] = verdict.passed();
  json["precision"] = PrecisionName(verdict.precision);
  json["exact_bits"] = verdict.exact_bits;
  const SelectionVerdict& s = verdict.selection;
  if (s.judged) {
    nlohmann::ordered_json selection{{"passed", s.passed},        {"rows", s.rows},
                                     {"identical_rows", s.identical_rows}, {"near_tie_rows", s.near_tie_rows},
                                     {"violation_rows", s.violation_rows}, {"invalid_rows", s.invalid_rows},
                                     {"tau", s.tau}};
    selection["listed"] = nlohmann::ordered_json::array();
    for (const Mismatch& m : s.listed) selection["listed"].push_back(MismatchJson(m));
    json["selection"] = selection;
  }
  json["tensors"] = nlohmann::ordered_json::array();
  for (const TensorVerdict& t : verdict.tensors) {
    nlohmann::ordered_json tensor{{"name", t.name},
                                  {"passed", t.passed},
                                  {"elements", t.elements},
                                  {"mismatches", t.mismatches},
                                  {"one_sided_nonfinite", t.one_sided_nonfinite},
                                  {"max_error", FiniteOrText(t.max_error)},
                                  {"naive_error", FiniteOrText(t.naive_error)},
                                  {"bound", FiniteOrText(t.bound)},
                                  {"nmse", FiniteOrText(t.nmse)},
                                  {"relative_l2", FiniteOrText(t.relative_l2)},
                                  {"max_ulps", FiniteOrText(t.max_ulps)},
                                  {"ulp_precision", PrecisionName(t.ulp_precision)}};
    if (t.worst.row >= 0) tensor["worst"] = MismatchJson(t.worst);
    tensor["listed"] = nlohmann::ordered_json::array();
    for (const Mismatch& m : t.listed) tensor["listed"].push_back(MismatchJson(m));
    json["tensors"].push_back(tensor);
  }
  json["attention_selection"] = verdict.attention_selection;
  return json.dump(2) + "\n";
}

}  // namespace msa
