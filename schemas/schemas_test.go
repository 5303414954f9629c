package schemas

import (
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/toolgateway/toolgateway/tools"
)

func TestEveryBundledSchemaCompiles(t *testing.T) {
	files, err := fs.Glob(FS, "*.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("only %d bundled schemas: %v", len(files), files)
	}
	for _, file := range files {
		name := strings.TrimSuffix(file, ".json")
		if !tools.ValidName(name) {
			t.Errorf("%s: file name is not a tool name", file)
		}
		raw, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tools.CompileSchema(name, raw); err != nil {
			t.Errorf("%s: %v", file, err)
		}
	}
}

func TestProvisionInfraSchemaReportsNestedLocations(t *testing.T) {
	raw, err := Load("provision-infra")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := tools.CompileSchema("provision-infra", raw)
	if err != nil {
		t.Fatal(err)
	}
	got, err := schema.ValidateJSON([]byte(`{"name": "db", "region": "eu-west-1", "cpus": 2, "disks": [{"size": 10}, {"size": 0}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Location != "/disks/1/size" {
		b, _ := json.Marshal(got)
		t.Fatalf("violations = %s, want one at /disks/1/size", b)
	}
}

func TestLoadUnknown(t *testing.T) {
	if _, err := Load("no-such-tool"); err == nil || !strings.Contains(err.Error(), `"no-such-tool"`) {
		t.Fatalf("err = %v", err)
	}
}
