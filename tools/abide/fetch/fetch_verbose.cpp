#include "fetch/fetch_verbose.h"

#include <cstdio>

#include "abide/headers.h"
#include "abide/redact.h"
#include "common.h"

namespace abide::cli {

using namespace std::chrono_literals;

std::string fmt_seconds(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", to_seconds(d));
  return buf;
}

// --verbose: one line per thing that happened, credentials redacted. Server
// bytes (header names and values) go through abide::printable() here; the
// planner's reasons and transport errors, made elsewhere, through safe_text().
void verbose_event(Progress& progress, const FetchJob& job, const ClientEvent& e) {
  using K = ClientEvent::Kind;
  const std::string tag = "* [" + std::to_string(job.index + 1) + "] ";
  switch (e.kind) {
    case K::kAttemptStarted: {
      std::string s = "> [" + std::to_string(job.index + 1) + "] " + e.request->method + " " + job.shown_url +
                      " (attempt " + std::to_string(e.attempt) + ")";
      if (e.attempt == 1) {
        for (const Header& h : e.request->headers.lines())
          s += "\n>   " + abide::printable(h.name) + ": " + printable_header_value(h.name, h.value);
        if (e.request->idempotency_key) s += "\n>   Idempotency-Key: " + *e.request->idempotency_key;
        // The key holds a credential's hash only, never the credential.
        if (!e.request->pacer_key.empty()) s += "\n" + tag + "pacer key " + abide::printable(e.request->pacer_key, 256);
      }
      progress.print_line(s);
      break;
    }
    case K::kResponseObserved: {
      std::string s = "< [" + std::to_string(job.index + 1) + "] " + std::to_string(e.response->status);
      for (const Header& h : e.response->headers.lines())
        s += "\n<   " + abide::printable(h.name) + ": " + printable_header_value(h.name, h.value);
      // What observe() ignored or adjusted (a malformed hint, a wrong day name, ...).
      if (e.signals != nullptr)
        for (const std::string& w : e.signals->warnings) s += "\n" + tag + "warning: " + safe_text(w, 1024);
      progress.print_line(s);
      break;
    }
    case K::kTransportError: progress.print_line(tag + "error: " + safe_text(e.error)); break;
    case K::kDecision: {
      // Once per attempt; the planner's notes (what it adjusted, and why) with it.
      std::string s = tag + std::string(to_string(e.plan->decision)) + ": " + safe_text(e.reason);
      for (const std::string& n : notes_text(e.plan->notes)) s += "\n" + tag + "note: " + safe_text(n, 1024);
      progress.print_line(s);
      progress.decision_said(e.index, e.reason);
      break;
    }
    case K::kWaitEnded:
      if (e.wait_kind == ClientEvent::WaitKind::kPacer && e.wait >= 1ms) {
        progress.print_line(tag + "paced " + fmt_seconds(e.wait) +
                            (e.held ? " by " + safe_text(describe(*e.held)) : std::string()));
      }
      break;
    case K::kFinished: {
      // An outcome that the last decision gave has had its reason printed with
      // that decision; one that came otherwise (the pacer, a cancel) says why.
      const engine::RequestOutcome& out = *e.outcome;
      const bool said = progress.outcome_said(e.index, out.reason);
      progress.print_line(tag + "outcome " + std::string(to_string(out.kind)) + (out.ambiguous ? " (ambiguous)" : "") +
                          (said ? std::string() : ": " + safe_text(out.reason)));
      break;
    }
    case K::kWaitStarted: break;
  }
}

}  // namespace abide::cli
