// Package kubecheck validates the Kubernetes manifests of deploy/ offline,
// against the Kubernetes API's own types: every object that `kustomize
// build` renders is decoded strictly by client-go's scheme, which refuses
// an unknown field, a duplicate field and a value of the wrong type, as an
// API server with strict field validation would. It is a module of its own
// so that the gateway's module does not depend on client-go.
//
// Schema validators such as kubeconform need the Kubernetes JSON schemas,
// which they download at run time; this check needs nothing but the Go
// module proxy, so it runs in CI offline.
package kubecheck
