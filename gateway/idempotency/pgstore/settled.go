package pgstore

import (
	"fmt"
	"strings"
)

// settledMigration is schema version 13: the claim function asks one
// helper, settled_answer, what a live row answers a call that cannot
// change it (its fingerprint differs, it completed, or its outcome is
// unknown), where it wrote that dispatch out three times: for the row
// under the key, for the effect's holder, and for the holder an approved
// call meets when it is consumed. What claim answers is unchanged; the
// signature is unchanged, and CREATE OR REPLACE drops the function's
// settings, so plan_cache_mode is set again.
var settledMigration = settledAnswerFunction + claimFunctionV13 + `
ALTER FUNCTION @.claim(text, text, text, text, text, text, bigint, bigint, text, boolean, text, bigint, text,
	text, integer, text, text, bigint, bigint, text, text, integer, text)
	SET plan_cache_mode = force_custom_plan;`

// settledAnswerFunction answers for a live row r: conflict when the call's
// fingerprint is not the row's, a replay of the stored response when it
// completed, unknown when its outcome is unknown; NULL while the row is
// open (in progress or in an approval state), which its caller decides.
const settledAnswerFunction = `
CREATE OR REPLACE FUNCTION @.settled_answer(r @.records, p_fingerprint text, p_conflict text,
	OUT outcome text, OUT resp_status integer, OUT resp_content_type text, OUT resp_body bytea)
LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
	IF r.fingerprint <> p_fingerprint THEN
		outcome := p_conflict;
	ELSIF r.state = 'COMPLETED' THEN
		outcome := 'replay';
		resp_status := r.status;
		resp_content_type := r.content_type;
		resp_body := r.body;
	ELSIF r.state = 'UNKNOWN' THEN
		outcome := 'unknown';
	END IF;
END
$fn$;
`

// askSettled is the call of settled_answer for row with the conflict
// outcome, at indent tabs.
func askSettled(indent int, row, conflict string) string {
	tabs := strings.Repeat("\t", indent)
	return fmt.Sprintf("%sSELECT * INTO outcome, resp_status, resp_content_type, resp_body\n%sFROM @.settled_answer(%s, p_fingerprint, '%s');\n",
		tabs, tabs, row, conflict)
}

// claimFunctionV13 is version 11's claim function with each of its three
// settled-row dispatches replaced by askSettled.
var claimFunctionV13 = replaceSpans(claimFunctionV11,
	// The row under the key.
	"\t\t\tIF rec.fingerprint <> p_fingerprint THEN\n",
	"\t\t\tELSIF rec.state = 'UNKNOWN' THEN\n\t\t\t\toutcome := 'unknown';\n\t\t\t\tRETURN;\n",
	askSettled(3, "rec", "key_reused")+
		"\t\t\tIF outcome = 'key_reused' THEN\n\t\t\t\texec_id := NULL;\n\t\t\t\tRETURN;\n"+
		"\t\t\tELSIF outcome IS NOT NULL THEN\n\t\t\t\tRETURN;\n",

	// The effect's holder met by an approved call being consumed.
	"\t\t\t\t\t\tIF eholder.fingerprint <> p_fingerprint THEN\n",
	"\t\t\t\t\t\tELSIF eholder.state = 'UNKNOWN' THEN\n\t\t\t\t\t\t\toutcome := 'unknown';\n\t\t\t\t\t\tELSE\n",
	askSettled(6, "eholder", "effect_conflict")+
		"\t\t\t\t\t\tIF outcome = 'effect_conflict' THEN\n\t\t\t\t\t\t\tholder_state := eholder.state;\n"+
		"\t\t\t\t\t\tELSIF outcome IS NULL THEN\n",

	// The effect's holder met by a new claim.
	"\t\t\t\tIF eholder.fingerprint <> p_fingerprint THEN\n",
	"\t\t\t\tELSIF eholder.state = 'UNKNOWN' THEN\n\t\t\t\t\toutcome := 'unknown';\n\t\t\t\t\tRETURN;\n",
	askSettled(4, "eholder", "effect_conflict")+
		"\t\t\t\tIF outcome = 'effect_conflict' THEN\n\t\t\t\t\tholder_state := eholder.state;\n\t\t\t\t\tRETURN;\n"+
		"\t\t\t\tELSIF outcome IS NOT NULL THEN\n\t\t\t\t\tRETURN;\n",
)

// replaceSpans replaces each span of s from a first line through the next
// occurrence of a last line (triples first, last, new), where first must
// occur exactly once: like mustReplace, for a span too long to spell out
// again.
func replaceSpans(s string, triples ...string) string {
	for i := 0; i < len(triples); i += 3 {
		first, last, with := triples[i], triples[i+1], triples[i+2]
		if n := strings.Count(s, first); n != 1 {
			panic(fmt.Sprintf("pgstore: claim function text %q found %d times, want once", first, n))
		}
		start := strings.Index(s, first)
		end := strings.Index(s[start:], last)
		if end < 0 {
			panic(fmt.Sprintf("pgstore: claim function text %q not found after %q", last, first))
		}
		s = s[:start] + with + s[start+end+len(last):]
	}
	return s
}
