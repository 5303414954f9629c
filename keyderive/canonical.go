package keyderive

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
)

// Canonicalize returns the RFC 8785 canonical form of one JSON value of any
// kind (object, array, string, number, literal). The input must be I-JSON;
// errors wrap ErrInvalidJSON and a specific reason such as ErrDuplicateName.
// When args is already canonical (what every SDK sends) the result is args
// itself, not a copy: callers must not modify one while using the other.
func Canonicalize(args []byte) ([]byte, error) {
	if _, ok := scanCanonical(args, false); ok {
		return args, nil
	}
	return canonicalizeGeneral(args)
}

// canonicalizeGeneral is Canonicalize for input that is not already
// canonical (or not valid at all).
func canonicalizeGeneral(args []byte) ([]byte, error) {
	// jcs.Transform is itself a strict parser: it rejects malformed JSON,
	// duplicate names, lone surrogates, invalid UTF-8 and numbers beyond the
	// double range, with errors that cannot be told apart. So valid input
	// costs one jcs pass and a depth scan, and only a rejection pays for the
	// slower, classifying parseIJSON. FuzzCanonicalize checks that both
	// parsers accept and reject the same inputs.
	canonical, err := jcs.Transform(args)
	if err != nil {
		return nil, classify(args, err)
	}
	if err := checkCanonicalDepth(canonical); err != nil {
		return nil, err
	}
	return canonical, nil
}

// Decode parses args once for the gateway and returns the I-JSON-checked value
// tree (map[string]any, []any, json.Number, string, bool, nil; json.Number so
// that JSON Schema validation sees the exact number the client wrote, not its
// double) and the canonical bytes. Errors are those of Canonicalize.
func Decode(args []byte) (value any, canonical []byte, err error) {
	if value, ok := scanCanonical(args, true); ok {
		// Canonical text is its own canonical form, so the tree of the text
		// is the tree of the canonical form: one pass for both.
		return value, args, nil
	}
	canonical, err = canonicalizeGeneral(args)
	if err != nil {
		return nil, nil, err
	}
	decoder := json.NewDecoder(bytes.NewReader(args))
	decoder.UseNumber()
	if err := decoder.Decode(&value); err != nil {
		// Unreachable after Canonicalize accepted args; reported, not hidden.
		return nil, nil, fmt.Errorf("%w: decode value tree: %s", ErrSyntax, err.Error())
	}
	return value, canonical, nil
}

// DecodeCanonical is Decode whose value tree is that of the canonical
// bytes: every number is the double the key is derived from, in its JCS
// spelling (1e-400 is 0, 1.50 is 1.5, 12345678901234567890 is
// 12345678901234567000). The gateway validates this tree against the
// tool's schema, so two spellings of one call (one key) never get
// different answers. A canonical body is verified and decoded in one pass
// and is returned as the canonical bytes itself (see Canonicalize).
func DecodeCanonical(args []byte) (value any, canonical []byte, err error) {
	if value, ok := scanCanonical(args, true); ok {
		return value, args, nil
	}
	canonical, err = canonicalizeGeneral(args)
	if err != nil {
		return nil, nil, err
	}
	// jcs's output is canonical, so the one-pass scanner builds its tree;
	// json.Decoder stays as the fallback should the two ever disagree.
	if value, ok := scanCanonical(canonical, true); ok {
		return value, canonical, nil
	}
	decoder := json.NewDecoder(bytes.NewReader(canonical))
	decoder.UseNumber()
	if err := decoder.Decode(&value); err != nil {
		// Unreachable: canonical JSON is valid JSON; reported, not hidden.
		return nil, nil, fmt.Errorf("%w: decode canonical value tree: %s", ErrSyntax, err.Error())
	}
	return value, canonical, nil
}

// classify finds the specific reason jcs rejected args.
func classify(args []byte, jcsErr error) error {
	if _, err := parseIJSON(args, false); err != nil {
		return err
	}
	// The two parsers disagree; stay on the safe side and reject.
	return fmt.Errorf("%w: %s", ErrSyntax, jcsErr.Error())
}

// checkCanonicalDepth enforces MaxDepth on canonical JSON, where strings
// escape only '"', '\\' and control characters, so a bracket inside a string
// is recognised by tracking quotes and backslashes alone.
func checkCanonicalDepth(canonical []byte) error {
	depth, inString := 0, false
	for i := 0; i < len(canonical); i++ {
		c := canonical[i]
		if inString {
			switch c {
			case '\\':
				i++
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > MaxDepth {
				return fmt.Errorf("%w: more than %d levels", ErrTooDeep, MaxDepth)
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}
