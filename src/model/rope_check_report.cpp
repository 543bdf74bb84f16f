// The check's report as JSON and as text, what `posenc check` and Python's posenc.check print
// (rope_check.hpp).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/model/rope_check.hpp"

namespace posenc {

std::string RopeCheckReportJson(const RopeCheckReport& r) {
  using nlohmann::json;
  json out;
  out["verdict"] = r.pass ? "pass" : "fail";
  out["target"] = r.target;
  out["form"] = r.form;
  out["tolerance"] = r.tolerance;
  out["seq_len"] = r.seq_len;
  out["elements"] = r.elements;
  out["elements_over_tolerance"] = r.elements_over;
  out["max_error_over_tolerance"] = r.max_ratio;
  auto opt = [](int64_t v) { return v < 0 ? json(nullptr) : json(v); };
  out["worst"] = {{"token", opt(r.worst.token)}, {"position", opt(r.worst.position)}, {"head", opt(r.worst.head)},
                  {"pair", opt(r.worst.pair)},   {"dim", opt(r.worst.dim)},           {"got", r.worst.got},
                  {"want", r.worst.want},        {"error", r.worst.error},            {"tolerance", r.worst.tolerance}};
  json diag = json::array();
  for (const RopeCause& c : r.diagnosis)
    diag.push_back({{"cause", c.id}, {"detail", c.detail}, {"max_error_over_tolerance", c.max_ratio}});
  out["diagnosis"] = diag;
  if (!r.pass && r.diagnosis.size() == 1 && r.diagnosis[0].id == "not_explained") {
    out["error_first_position"] = opt(r.error_first_position);
    out["error_pairs"] = r.error_pairs;
  }
  return out.dump(2, ' ', false, json::error_handler_t::replace);
}

std::string RopeCheckReportText(const RopeCheckReport& r) {
  std::string out = fmt::format("{}: {} ({}, {} elements, tolerance {})\n", r.pass ? "pass" : "FAIL", r.target,
                                r.form, r.elements, r.tolerance);
  std::string at;
  if (r.worst.token >= 0) at += fmt::format(" token {}", r.worst.token);
  if (r.worst.position >= 0) at += fmt::format(" position {}", r.worst.position);
  if (r.worst.head >= 0) at += fmt::format(" head {}", r.worst.head);
  if (r.worst.pair >= 0) at += fmt::format(" pair {}", r.worst.pair);
  if (r.worst.dim >= 0) at += fmt::format(" dim {}", r.worst.dim);
  out += fmt::format("worst element:{}: got {:.9g}, want {:.9g}, error {:.3g} ({:.3g} x tolerance)\n", at, r.worst.got,
                     r.worst.want, r.worst.error, r.worst.tolerance > 0 ? r.worst.error / r.worst.tolerance : 0.0);
  if (r.pass) return out;
  out += fmt::format("{} of {} elements over tolerance\n", r.elements_over, r.elements);
  out += "diagnosis (best first):\n";
  for (const RopeCause& c : r.diagnosis)
    out += fmt::format("  {:<18} {} (max error {:.3g} x tolerance)\n", c.id, c.detail, c.max_ratio);
  return out;
}

}  // namespace posenc
