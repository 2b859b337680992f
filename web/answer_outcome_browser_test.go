package web

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// approvedOf finds an answer's note that calls an act approved and
// nothing more, as "valve-1.open → OFF: approved (apr-…)." did of an act
// then refused at the act.
var approvedOf = regexp.MustCompile(`: approved \(apr-`)

// TestAnswerSaysWhatIsKnown approves, at desk and at phone size, a request
// that the mode, switched to observe while it waited, then refuses at the
// act. What the page says of the answer does not contradict the card
// ("approved, refused at the act"): it says the request was approved and
// that what came of the act is on the card, and it says so on that card,
// in view. The keyboard focus moves to the answered card, not to the
// page's body, so that the next Tab starts there.
func TestAnswerSaysWhatIsKnown(t *testing.T) {
	for _, vp := range viewports {
		t.Run(vp.name, func(t *testing.T) {
			s := newSite(t, siteOptions{})
			b := newBrowser(t, s.srv.URL)
			b.do("the viewport", chromedp.EmulateViewport(vp.w, vp.h))
			b.login("ann", "/approvals")
			b.poll("the live link", `document.getElementById("link").textContent === "live"`)
			id := approvalID.FindStringSubmatch(s.expect("POST", "/api/v1/commands", "operator",
				`{"device":"valve-1","capability":"open","value":false}`, 202, "pending_approval"))[1]
			b.poll("the request", `!!document.querySelector("#approval-`+id+` button.approve")`)
			s.expect("POST", "/api/v1/mode", "admin", `{"mode":"observe","reason":"looking only"}`, 200, `"name":"observe"`)
			b.poll("the foresight", `document.querySelector("#approval-`+id+` .foresight.refuse") !== null`)
			b.do("approving under observe", chromedp.Click(chromedp.CSS("#approval-"+id+" button.approve")))
			card := `document.getElementById("answered-` + id + `")`
			b.poll("the refusal on the card", `(`+card+` || {textContent: ""}).textContent.includes("approved, refused at the act")`)
			b.poll("the answer's note", `!!document.querySelector("main p.outcome, main > p.note")`)
			// The note moves to the answered card once the page's update is
			// drawn: given a few seconds for it on a busy machine.
			_, _ = chromedp.Run(b.ctx, chromedp.Poll[bool](`(() => { const c = `+card+`, n = c && c.querySelector("p.outcome");
				if (!n) return false;
				const r = n.getBoundingClientRect();
				return document.activeElement === c && r.top >= -1 && r.bottom <= innerHeight + 1; })()`, chromedp.WithPollingTimeout(5*time.Second)))
			b.shot("answered-" + vp.name)
			var got struct {
				Page, Note  string
				InView      bool
				Focused     string
				NoteOnCard  bool
				TopNoteText string
			}
			if err := json.Unmarshal([]byte(eval[string](b, `(() => {
				const card = `+card+`, note = document.querySelector("main p.outcome, main > p.note");
				const r = note.getBoundingClientRect(), top = document.querySelector("main > p.note");
				return JSON.stringify({page: document.getElementById("main").textContent, note: note.textContent,
					inView: r.top >= -1 && r.bottom <= innerHeight + 1 && r.height > 0,
					focused: document.activeElement.id || document.activeElement.tagName, noteOnCard: card.contains(note),
					topNoteText: top ? top.textContent : ""});
			})()`)), &got); err != nil {
				t.Fatal(err)
			}
			if approvedOf.MatchString(got.Page) || !strings.Contains(got.Note, "What came of the act is on its card") {
				t.Errorf("the answer's note says %q; want it to leave the act to its card, which says it was refused at the act", got.Note)
			}
			if want := "answered-" + id; got.Focused != want {
				t.Errorf("after the answer, the focus is on %s, want the answered card %s", got.Focused, want)
			}
			if !got.NoteOnCard || !got.InView {
				t.Errorf("the answer's note %q is on the answered card: %v, in view: %v; want both", got.Note, got.NoteOnCard, got.InView)
			}
			if got.TopNoteText != "" {
				t.Errorf("the top of the page says %q too", got.TopNoteText)
			}
		})
	}
}
