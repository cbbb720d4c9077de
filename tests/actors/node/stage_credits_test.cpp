// StageCredits against transcripts: a sequence of events between a stage and its downstream in
// ("send <handoff>", "credit <seq>" for the downstream's credit_atom or its answer, whichever comes
// first), and what the object orders out ("seq N", "drop <handoff>", "next", "nothing", "wait").
#include "actors/node/stage_credits.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace ember {
namespace stage_credits_test {

/// Plays `events` on a fresh StageCredits; one line of orders per event.
std::vector<std::string> play(const std::vector<std::string>& events) {
  StageCredits c;
  std::vector<std::string> out;
  for (const std::string& e : events) {
    std::istringstream in(e);
    std::string verb, arg;
    in >> verb >> arg;
    if (verb == "send") {
      if (!c.may_send()) {
        out.push_back("wait");
        continue;
      }
      out.push_back("seq " + std::to_string(c.sent(arg == "-" ? "" : arg)));
    } else if (verb == "credit") {
      auto t = c.taken(std::stoull(arg));
      if (!t) {
        out.push_back("nothing");
      } else {
        out.push_back(t->drop_handoff.empty() ? "next" : "drop " + t->drop_handoff + ", next");
      }
    }
    EXPECT_EQ(c.credits() + c.outstanding(), StageCredits::kWindow) << "after " << e;
  }
  return out;
}

TEST(StageCredits, OneRequestDownstreamAtATimeEachCreditOnce) {
  EXPECT_EQ(play({"send h1", "send h2", "credit 1", "send h2", "credit 2", "credit 2"}),
            (std::vector<std::string>{"seq 1", "wait", "drop h1, next", "seq 2", "drop h2, next", "nothing"}));
}

TEST(StageCredits, AnAnswerBeforeTheCreditGivesItBackAndTheLateCreditIsNothing) {
  // The downstream answered request 1 (the hop ended) before its credit_atom arrived.
  EXPECT_EQ(play({"send h1", "credit 1", "credit 1", "send h2"}),
            (std::vector<std::string>{"seq 1", "drop h1, next", "nothing", "seq 2"}));
}

TEST(StageCredits, InlineTensorsHaveNoHandoffToDrop) {
  EXPECT_EQ(play({"send -", "credit 1", "send -", "credit 2"}),
            (std::vector<std::string>{"seq 1", "next", "seq 2", "next"}));
}

TEST(StageCredits, CreditsForSeqsNeverSentOrFromAnotherStageChangeNothing) {
  EXPECT_EQ(play({"credit 1", "send h1", "credit 7", "credit 0", "send h2", "credit 1"}),
            (std::vector<std::string>{"nothing", "seq 1", "nothing", "nothing", "wait", "drop h1, next"}));
}

}  // namespace stage_credits_test
}  // namespace ember
