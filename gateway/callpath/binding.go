package callpath

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/gowebpki/jcs"

	"github.com/toolgateway/toolgateway/gateway/decide"
	"github.com/toolgateway/toolgateway/tools"
)

// What an approval is bound to beyond the record's key (which binds
// session, step, tool and canonical arguments): the tool's decide config
// and its definition as they were when the approval was asked. The decide
// stage computes the binding of every call it asks an approval for, and
// of every call that may consume one; the claim that consumes an
// approved record hands back the approval with the binding it was asked
// under, and a difference voids it (approval_stale, claim.go).

// approvalBinding is "<policy>.<definition>": the policy digest (the
// receipts' `policy`, SHA-256 of the JCS of the normalized rules) and the
// SHA-256 of the tool's definition (definitionHash).
func approvalBinding(policy *decide.Policy, spec tools.Spec) string {
	return policy.Digest() + "." + definitionHash(spec)
}

// definitionHash is the SHA-256 (hex) of what a tool is: its name, input
// schema (JCS, or its bytes when it is no JSON JCS takes), where it runs
// and the flags that change how it runs. A pinned definition hash joins
// it when pins land.
func definitionHash(spec tools.Spec) string {
	schema := []byte(spec.InputSchema)
	if canonical, err := jcs.Transform(schema); err == nil {
		schema = canonical
	}
	def, err := json.Marshal(struct {
		Name          string `json:"name"`
		Schema        string `json:"schema"`
		Target        string `json:"target"`
		ReadOnly      bool   `json:"read_only"`
		Transactional bool   `json:"transactional"`
	}{spec.Name, string(schema), spec.Target, spec.ReadOnly, spec.Transactional})
	if err != nil { // a struct of strings and bools always marshals
		panic(err)
	}
	sum := sha256.Sum256(def)
	return hex.EncodeToString(sum[:])
}
