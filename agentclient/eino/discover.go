package eino

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/cloudwego/eino/schema"
	"github.com/eino-contrib/jsonschema"

	"github.com/toolgateway/toolgateway/tools"
)

// maxCatalogBytes bounds the discovery document read.
const maxCatalogBytes = 16 << 20

// Discover lists the gateway's tools (GET {baseURL}/api/tools/v1) as Eino
// tool definitions for Gateway.Tools: name, description and the input
// schema as the model's parameters. httpClient nil means
// http.DefaultClient; token, when not empty, is sent as the bearer token.
func Discover(ctx context.Context, httpClient *http.Client, baseURL, token string) ([]*schema.ToolInfo, error) {
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+"/api/tools/v1", nil)
	if err != nil {
		return nil, fmt.Errorf("toolgateway eino: discovery request: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("toolgateway eino: discovery: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCatalogBytes))
	if err != nil {
		return nil, fmt.Errorf("toolgateway eino: read the discovery document: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("toolgateway eino: discovery answered %d", resp.StatusCode)
	}
	var catalog tools.NativeCatalog
	if err := json.Unmarshal(body, &catalog); err != nil {
		return nil, fmt.Errorf("toolgateway eino: decode the discovery document: %w", err)
	}
	infos := make([]*schema.ToolInfo, 0, len(catalog.Tools))
	for _, t := range catalog.Tools {
		params := &jsonschema.Schema{}
		if err := json.Unmarshal(t.InputSchema, params); err != nil {
			return nil, fmt.Errorf("toolgateway eino: input schema of %s: %w", t.Name, err)
		}
		infos = append(infos, &schema.ToolInfo{Name: t.Name, Desc: t.Description, ParamsOneOf: schema.NewParamsOneOfByJSONSchema(params)})
	}
	return infos, nil
}
