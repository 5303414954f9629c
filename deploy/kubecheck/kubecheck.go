package kubecheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Object is one decoded manifest: its kind and name, for reports.
type Object struct {
	Kind, Name string
}

// Strict decodes every YAML document of manifests with the Kubernetes
// API's types and strict field validation, and returns the objects, or the
// first document that does not decode, named by its position.
func Strict(manifests []byte) ([]Object, error) {
	decoder := serializer.NewCodecFactory(scheme.Scheme, serializer.EnableStrict).UniversalDeserializer()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifests)))
	var objects []Object
	for n := 1; ; n++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return objects, fmt.Errorf("document %d: %w", n, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err != nil {
			return objects, fmt.Errorf("document %d: %w", n, err)
		}
		name := ""
		if named, ok := obj.(interface{ GetName() string }); ok {
			name = named.GetName()
		}
		objects = append(objects, Object{Kind: gvk.Kind, Name: name})
	}
	return objects, nil
}
