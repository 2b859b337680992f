package web

import (
	"strings"

	"github.com/shadowgate/shadowgate/runtime"
)

// actView is what came of an approved act, for people: approved is not
// acted, and a card that says "approved" of an act refused at the act
// misleads the person who tapped it.
type actView struct {
	// Result is "confirmed", "contradicted", "unconfirmed", "refused",
	// "failed", "cancelled" or "acting" (not known yet).
	Result string `json:"result"`
	// Text says it in a few words: "acted and confirmed", "refused at
	// the act".
	Text string `json:"text"`
	// Why is the engine's reason, or the receipt's detail.
	Why string `json:"why,omitempty"`
	// Observed is what the read-back saw, if anything.
	Observed string `json:"observed,omitempty"`
	// Good is true for an act done and confirmed.
	Good bool `json:"-"`
}

// actOf tells the outcome of an approved act from its attempt (nil when
// none was made) and its run (nil when the engine no longer knows it).
// An act refused at the act makes no attempt: the run's end says it.
func actOf(at *runtime.Attempt, run *runtime.RunRecord) *actView {
	if at != nil && at.Receipt != nil {
		r := at.Receipt
		v := &actView{Why: r.Detail}
		if r.Observed != nil {
			v.Observed = valueText(r.Observed)
		}
		switch r.Confirmation {
		case runtime.Confirmed:
			v.Result, v.Text, v.Good = "confirmed", "acted and confirmed", true
		case runtime.WrongFinal, runtime.Returned, runtime.NotStarted:
			v.Result, v.Text = "contradicted", "acted and contradicted ("+string(r.Confirmation)+")"
		default:
			v.Result, v.Text = "unconfirmed", "acted, not confirmed ("+string(r.Confirmation)+")"
		}
		return v
	}
	if at != nil {
		switch at.State {
		case runtime.AttemptRefused:
			return &actView{Result: "refused", Text: "refused at the act", Why: atTheAct(at.Why)}
		case runtime.AttemptFailed:
			return &actView{Result: "failed", Text: "the act failed", Why: at.Why}
		case runtime.AttemptUnknown:
			return &actView{Result: "failed", Text: "the act's outcome is unknown", Why: at.Why}
		}
	}
	if run == nil {
		if at == nil {
			return nil
		}
		return &actView{Result: "acting", Text: "acting"}
	}
	if run.Status != runtime.RunEnded {
		return &actView{Result: "acting", Text: "acting"}
	}
	switch run.End {
	case runtime.EndRefused:
		return &actView{Result: "refused", Text: "refused at the act", Why: atTheAct(run.Why)}
	case runtime.EndFailed, runtime.EndLeaseExhausted:
		return &actView{Result: "failed", Text: "the act failed", Why: run.Why}
	case runtime.EndCancelled:
		return &actView{Result: "cancelled", Text: "cancelled before the act", Why: run.Why}
	}
	return nil
}

// atTheAct drops the engine's "at the act: ", which the text says.
func atTheAct(why string) string {
	return strings.TrimPrefix(why, "at the act: ")
}

// runRecord returns the run with the id, or nil.
func (s *Server) runRecord(id string) *runtime.RunRecord {
	if id == "" {
		return nil
	}
	for _, r := range s.eng.Runs() {
		if r.ID == id {
			return &r
		}
	}
	return nil
}
