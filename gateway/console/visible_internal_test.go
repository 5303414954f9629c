package console

import "testing"

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"invoice\u202efdp.exe":            `invoice\u202efdp.exe`,
		"plain text, ünïcödé, 日本語 ✓":      "plain text, ünïcödé, 日本語 ✓",
		"two\nlines\tand a tab":           "two\nlines\tand a tab",
		"\u202a\u202b\u202c\u202d":        `\u202a\u202b\u202c\u202d`,
		"\u2066x\u2067y\u2068z\u2069":     `\u2066x\u2067y\u2068z\u2069`,
		"\u200el\u200fr":                  `\u200el\u200fr`,
		"zero\u200bwidth\u200c\u200d":     `zero\u200bwidth\u200c\u200d`,
		"\ufeffbom\u2060word-joiner":      `\ufeffbom\u2060word-joiner`,
		"line\u2028sep\u2029para":         `line\u2028sep\u2029para`,
		"bell\a esc\x1b[31m cr\r del\x7f": `bell\u0007 esc\u001b[31m cr\u000d del\u007f`,
		"c1\u0085":                        `c1\u0085`,
		"tag\U000E0041":                   `tag\U000e0041`,
		"filler\u3164":                    `filler\u3164`,
		"bad\xffbyte":                     `bad\xffbyte`,
		"":                                "",
	} {
		if got := Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}
