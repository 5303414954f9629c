package console

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Visible is s as a person should see it: every character that changes
// how text around it is shown, or shows as nothing, is written as its
// escape (\u202e) instead. That is format characters (Unicode category
// Cf: the bidirectional overrides and isolates U+202A–202E and
// U+2066–2069, the marks U+200E/200F, zero-width spaces and joiners,
// U+FEFF), control characters (Cc) other than newline and tab, the line
// and paragraph separators U+2028/2029, and the Hangul fillers that
// render blank; an invalid UTF-8 byte is written as \xNN. So an argument
// "invoice\u202efdp.exe" reads as that, not as "invoice" followed by
// "exe.pdf" reversed. Every place that shows a caller's strings to a
// person (the console's pages, the admin CLI) goes through it.
func Visible(s string) string {
	i := strings.IndexFunc(s, hidden)
	if i < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case hidden(r) && r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08x`, r)
		case hidden(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// hidden reports whether r is shown escaped by Visible.
func hidden(r rune) bool {
	switch {
	case r == '\n' || r == '\t':
		return false
	case r == '\u2028' || r == '\u2029',
		r == '\u115f' || r == '\u1160' || r == '\u3164' || r == '\uffa0': // Hangul fillers: letters that draw nothing
		return true
	}
	return unicode.Is(unicode.Cf, r) || unicode.Is(unicode.Cc, r)
}
