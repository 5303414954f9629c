package kubecheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// render runs `kustomize build` on a folder of deploy/.
func render(t *testing.T, dir string) []byte {
	t.Helper()
	kustomize, err := exec.LookPath("kustomize")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("kustomize is not installed (.ci/run installs it)")
		}
		t.Skip("kustomize not installed (go install sigs.k8s.io/kustomize/kustomize/v5)")
	}
	out, err := exec.Command(kustomize, "build", filepath.Join("..", dir)).Output()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return out
}

// TestManifestsDecodeStrictly: both Kubernetes variants render to objects
// the Kubernetes API's types accept with strict field validation, and each
// renders the objects docs/deploy.md describes.
func TestManifestsDecodeStrictly(t *testing.T) {
	for _, dir := range []string{"kubernetes", "kubernetes-postgres"} {
		t.Run(dir, func(t *testing.T) {
			objects, err := Strict(render(t, dir))
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{}
			for _, o := range objects {
				kinds[o.Kind] = true
			}
			for _, want := range []string{"Namespace", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"} {
				if !kinds[want] {
					t.Errorf("%s renders no %s (rendered: %v)", dir, want, objects)
				}
			}
		})
	}
	secret, err := os.ReadFile(filepath.Join("..", "kubernetes", "secret.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Strict(secret); err != nil {
		t.Fatalf("secret.example.yaml: %v", err)
	}
}

// TestStrictRefusesWhatAnAPIServerWould: the check is not vacuous — a
// misspelt field, a value of the wrong type and an unknown kind are each
// refused, naming the document.
func TestStrictRefusesWhatAnAPIServerWould(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata: {name: gw}
spec:
  selector: {matchLabels: {app: gw}}
  template:
    metadata: {labels: {app: gw}}
    spec:
      containers: [{name: gw, image: gw}]
`
	if _, err := Strict([]byte(deployment)); err != nil {
		t.Fatalf("a valid Deployment: %v", err)
	}
	for name, c := range map[string]struct{ doc, want string }{
		"misspelt field":  {deployment + "  replica: 3\n", `unknown field "spec.replica"`},
		"wrong type":      {deployment + "  paused: maybe\n", "paused"},
		"unknown kind":    {"apiVersion: apps/v1\nkind: Deploymnet\nmetadata: {name: gw}\n", "Deploymnet"},
		"second document": {"apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n" + deployment + "  replica: 3\n", "document 2"},
	} {
		_, err := Strict([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}
