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
  std::string text = m.key_row >= 0 ? "seq " + std::to_string(m.sequence) + " key " + std::to_string(m.key) +
                                          " (key row " + std::to_string(m.key_row) + ")"
                     : m.row >= 0 ? "seq " + std::to_string(m.sequence) + " query " + std::to_string(m.query) +
                                        " (row " + std::to_string(m.row) + ")"
                                  : "the value";
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
  if (m.key_row >= 0) {
    json["key"] = m.key;
    json["key_row"] = m.key_row;
  }
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

std::string ChosenText(std::string_view value, const std::string& from) {
  return std::string(value) + " (" + from + ")";
}

std::string RulesText(const Verdict& verdict) {
  const CandidateFormat& f = verdict.format;
  const SelectionVerdict& s = verdict.selection;
  std::string text;
  if (verdict.exact_bits) {
    text += "rules: exact (bit-identical to the FP64 canonical reference)\n";
  } else {
    text +=
        "rules: |got - ref| <= 2 * max(naive error, floor) + 1 ulp at max|ref|, each output at its precision "
        "(naive: the reference algorithm run naively at that precision, the larger of both scale orders; floor: "
        "the error analysis of its sums); selection within tau\n";
  }
  if (s.judged || f.score.from != "default") {
    text += "    scores: " + ChosenText(PrecisionName(f.score.value), f.score.from);
    if (s.judged) text += "; tau = " + Number(s.tau) + " (" + s.tau_from + ")";
    text += "\n";
  }
  if (s.judged) {
    text += "    selection: order " + ChosenText(SelectionOrderName(f.order.value), f.order.from) + ", layout " +
            ChosenText(TopkLayoutName(f.topk_layout.value), f.topk_layout.from);
    if (s.layout.ambiguous) {
      text += ", assumed: total_q == Hidx, so the shape cannot tell head_major from query_major";
    }
    text += "\n";
  }
  for (const TensorVerdict& t : verdict.tensors) {
    text += "    " + t.name + ": at " + ChosenText(PrecisionName(t.precision.value), t.precision.from);
    if (t.name != "out") text += ", base " + ChosenText(LseBaseName(f.lse_base.value), f.lse_base.from);
    text += "\n";
  }
  return text;
}

// A selection row's place (its slot, if any, is in the message).
std::string RowText(const Mismatch& m) {
  Mismatch row = m;
  row.index = -1;
  return "      group " + std::to_string(m.head) + " " + Where(row) + ": " + m.why + "\n";
}

std::string SelectionText(const Verdict& verdict, RuleSpelling spell) {
  const SelectionVerdict& s = verdict.selection;
  if (!s.judged) return "  selection  not supplied\n";
  const bool rows_pass = s.invalid_rows == 0 && s.violation_rows == 0;
  std::string text = std::string("  selection  ") + (rows_pass ? "PASS" : "FAIL") + "  " + std::to_string(s.rows) +
                     " rows: " + std::to_string(s.identical_rows) + " identical, " + std::to_string(s.near_tie_rows) +
                     " near-tie flip(s) within tau = " + Number(s.tau) + ", " + std::to_string(s.violation_rows) +
                     " violations, " + std::to_string(s.invalid_rows) + " invalid";
  if (s.order_fault_rows > 0) text += ", " + std::to_string(s.order_fault_rows) + " order faults";
  text += "\n";
  for (const Mismatch& m : s.listed) text += RowText(m);
  if (s.order_fault_rows > 0) {
    text += "  order      FAIL  " + std::to_string(s.order_fault_rows) + " of " + std::to_string(s.rows) +
            " rows hold the right blocks but not the local block in the last valid slot (order strict)\n";
    for (const Mismatch& m : s.order_listed) text += RowText(m);
    text +=
        "      if the implementation's contract orders the valid prefix otherwise (vLLM and SGLang put the forced "
        "blocks first), judge with " +
        RuleSetting(spell, "order", "any") + " (or metadata order = any)\n";
  }
  if (s.layout.transposed_passes) {
    const TopkLayout other =
        s.layout.assumed == TopkLayout::kHeadMajor ? TopkLayout::kQueryMajor : TopkLayout::kHeadMajor;
    text += "  layout     FAIL  read as " + std::string(TopkLayoutName(s.layout.assumed)) +
            " (total_q == Hidx: the shape cannot tell), that reading fails; read as " +
            std::string(TopkLayoutName(other)) + " every row passes: pass " +
            RuleSetting(spell, "topk_layout", TopkLayoutName(other)) + " (or metadata topk_layout)\n";
  }
  return text;
}

}  // namespace

std::string CliFlagSpelling(std::string_view key) {
  std::string flag = "--" + std::string(key);
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

std::string RuleSetting(RuleSpelling spell, std::string_view key, std::string_view value) {
  const std::string spelled = spell(key);
  return spelled + (spelled.ends_with('=') ? "" : " ") + std::string(value);
}

std::string FormatVerdict(const Verdict& verdict, RuleSpelling spell) {
  std::string text = RulesText(verdict) + SelectionText(verdict, spell);
  for (const TensorVerdict& t : verdict.tensors) {
    char line[512];
    if (verdict.exact_bits) {
      std::snprintf(line, sizeof(line), "  %-9s  %s  %lld of %lld elements differ in bits, max error %s",
                    t.name.c_str(), t.passed ? "PASS" : "FAIL", static_cast<long long>(t.mismatches),
                    static_cast<long long>(t.elements), Number(t.max_error).c_str());
    } else {
      std::snprintf(line, sizeof(line),
                    "  %-9s  %s  max error %s (bound %s: naive %s, floor %s), nmse %s, rel L2 %s, %lld of %lld over",
                    t.name.c_str(), t.passed ? "PASS" : "FAIL", Number(t.max_error).c_str(), Number(t.bound).c_str(),
                    Number(t.naive_error).c_str(), Number(t.floor).c_str(), Number(t.nmse).c_str(),
                    Number(t.relative_l2).c_str(), static_cast<long long>(t.mismatches),
                    static_cast<long long>(t.elements));
    }
    text += line;
    if (t.max_allowance > 0)
      text += ", rows with an ambiguous fp16 block score allowed up to " + Number(t.max_allowance) + " more";
    if (t.one_sided_nonfinite > 0) text += ", " + std::to_string(t.one_sided_nonfinite) + " one-sided NaN/Inf";
    text += "\n";
    if (t.worst.row >= 0 || t.worst.key_row >= 0 || t.elements == 1) {
      text += "      worst: " + Where(t.worst) + ": " + Values(t.worst, t.precision.value) + "\n";
    }
    for (const Mismatch& m : t.listed) text += "      over:  " + Where(m) + ": " + Values(m, t.precision.value) + "\n";
  }
  if (!verdict.tensors.empty()) text += "  attention judged on the " + verdict.attention_selection + " selection\n";
  text += std::string("RESULT: ") + (verdict.passed() ? "PASS" : "FAIL") + "\n";
  return text;
}

std::string VerdictToJson(const Verdict& verdict) {
  nlohmann::ordered_json json;
  const CandidateFormat& f = verdict.format;
  const SelectionVerdict& s = verdict.selection;
  json["passed"] = verdict.passed();
  json["exact_bits"] = verdict.exact_bits;
  json["rules"] = {{"score_precision", PrecisionName(f.score.value)},
                   {"score_precision_from", f.score.from},
                   {"order", SelectionOrderName(f.order.value)},
                   {"order_from", f.order.from},
                   {"topk_layout", TopkLayoutName(f.topk_layout.value)},
                   {"topk_layout_from", f.topk_layout.from},
                   {"lse_base", LseBaseName(f.lse_base.value)},
                   {"lse_base_from", f.lse_base.from},
                   {"tau", s.tau},
                   {"tau_from", s.tau_from}};
  if (s.judged) {
    nlohmann::ordered_json selection{{"passed", s.passed},
                                     {"rows", s.rows},
                                     {"identical_rows", s.identical_rows},
                                     {"near_tie_rows", s.near_tie_rows},
                                     {"violation_rows", s.violation_rows},
                                     {"invalid_rows", s.invalid_rows},
                                     {"order_fault_rows", s.order_fault_rows},
                                     {"tau", s.tau}};
    selection["layout"] = {{"assumed", TopkLayoutName(s.layout.assumed)},
                           {"ambiguous", s.layout.ambiguous},
                           {"transposed_passes", s.layout.transposed_passes}};
    selection["listed"] = nlohmann::ordered_json::array();
    for (const Mismatch& m : s.listed) selection["listed"].push_back(MismatchJson(m));
    selection["order_faults_listed"] = nlohmann::ordered_json::array();
    for (const Mismatch& m : s.order_listed) selection["order_faults_listed"].push_back(MismatchJson(m));
    json["selection"] = selection;
  }
  json["tensors"] = nlohmann::ordered_json::array();
  for (const TensorVerdict& t : verdict.tensors) {
    nlohmann::ordered_json tensor{{"name", t.name},
                                  {"passed", t.passed},
                                  {"precision", PrecisionName(t.precision.value)},
                                  {"precision_from", t.precision.from},
                                  {"elements", t.elements},
                                  {"mismatches", t.mismatches},
                                  {"one_sided_nonfinite", t.one_sided_nonfinite},
                                  {"max_error", FiniteOrText(t.max_error)},
                                  {"naive_error", FiniteOrText(t.naive_error)},
                                  {"floor", FiniteOrText(t.floor)},
                                  {"bound", FiniteOrText(t.bound)},
                                  {"max_allowance", FiniteOrText(t.max_allowance)},
                                  {"nmse", FiniteOrText(t.nmse)},
                                  {"relative_l2", FiniteOrText(t.relative_l2)},
                                  {"max_ulps", FiniteOrText(t.max_ulps)}};
    if (t.worst.row >= 0 || t.worst.key_row >= 0 || t.elements == 1) tensor["worst"] = MismatchJson(t.worst);
    tensor["listed"] = nlohmann::ordered_json::array();
    for (const Mismatch& m : t.listed) tensor["listed"].push_back(MismatchJson(m));
    json["tensors"].push_back(tensor);
  }
  json["attention_selection"] = verdict.attention_selection;
  return json.dump(2) + "\n";
}

}  // namespace msa
