package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	"github.com/toolgateway/toolgateway/tools"
)

// What the admin API's listings (records, approvals, receipts) read alike:
// each query parameter at most once and none unknown, the tenant and tool
// filters as names, and the page size. Each listing reads its own
// parameters between these, in the order its errors have always come.

// checkListParams refuses a query with a parameter known does not name,
// or one given twice.
func checkListParams(q url.Values, known ...string) error {
	for name, values := range q {
		if !slices.Contains(known, name) {
			return fmt.Errorf("unknown query parameter %q", name)
		}
		if len(values) > 1 {
			return fmt.Errorf("query parameter %q given twice", name)
		}
	}
	return nil
}

// checkListNames refuses a tenant or tool filter that is not a name (a
// name never reaches the store or a log otherwise).
func checkListNames(tenant, tool string) error {
	if tenant != "" && !tools.ValidName(tenant) {
		return errors.New("tenant is not a tenant name")
	}
	if tool != "" && !tools.ValidName(tool) {
		return errors.New("tool is not a tool name")
	}
	return nil
}

// listLimit reads ?limit=, 1 … most; def when absent.
func listLimit(q url.Values, def, most int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("limit %q: want 1 … %d", v, most)
	}
	return n, nil
}
