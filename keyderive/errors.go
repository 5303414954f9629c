package keyderive

import "errors"

// ErrInvalidJSON is wrapped by every parse and I-JSON failure: the gateway
// answers all of them with 400 invalid_json.
var ErrInvalidJSON = errors.New("keyderive: invalid JSON")

// invalidJSONKind is a specific reason for ErrInvalidJSON. It unwraps to
// ErrInvalidJSON so that errors.Is matches both the reason and the category.
type invalidJSONKind struct{ text string }

func (e *invalidJSONKind) Error() string { return e.text }
func (e *invalidJSONKind) Unwrap() error { return ErrInvalidJSON }

// The reasons JSON text is rejected. Each one also matches ErrInvalidJSON.
var (
	// ErrSyntax: not JSON at all (RFC 8259 grammar), including a leading byte
	// order mark, an empty document and anything after the top-level value.
	ErrSyntax error = &invalidJSONKind{"keyderive: JSON syntax error"}
	// ErrDuplicateName: an object has two members with the same name (after
	// escapes are decoded, so "a" and "\u0061" are the same name).
	ErrDuplicateName error = &invalidJSONKind{"keyderive: duplicate member name"}
	// ErrLoneSurrogate: a \u escape of a UTF-16 surrogate that is not part of
	// a high+low pair.
	ErrLoneSurrogate error = &invalidJSONKind{"keyderive: lone surrogate escape"}
	// ErrInvalidUTF8: the document is not valid UTF-8.
	ErrInvalidUTF8 error = &invalidJSONKind{"keyderive: invalid UTF-8"}
	// ErrNumberRange: a number's magnitude is beyond the IEEE-754 double range.
	ErrNumberRange error = &invalidJSONKind{"keyderive: number out of double range"}
	// ErrTooDeep: arrays and objects nested deeper than MaxDepth.
	ErrTooDeep error = &invalidJSONKind{"keyderive: nesting too deep"}
)

// ErrNotObject means the arguments are valid JSON but not an object, which Key
// requires. It does not wrap ErrInvalidJSON: the gateway maps it to
// invalid_arguments, not invalid_json.
var ErrNotObject = errors.New("keyderive: arguments are not a JSON object")

// Errors for the other inputs of the key.
var (
	// ErrInvalidSession: the session id is not 1–256 visible ASCII characters
	// (0x21–0x7E) without ':'.
	ErrInvalidSession = errors.New("keyderive: invalid session id")
	// ErrInvalidStep: the step index is above MaxStepIndex, or its decimal
	// form is malformed.
	ErrInvalidStep = errors.New("keyderive: invalid step index")
	// ErrInvalidTool: the tool name does not match ^[a-z0-9][a-z0-9_-]{0,63}$.
	ErrInvalidTool = errors.New("keyderive: invalid tool name")
)
