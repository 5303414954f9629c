//go:build deps

// Package deps pins the module dependencies until the code that uses them lands.
package deps

import (
	_ "github.com/go-chi/chi/v5"
	_ "github.com/gowebpki/jcs"
	_ "github.com/oklog/ulid/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/santhosh-tekuri/jsonschema/v5"
	_ "go.etcd.io/bbolt"
	_ "go.yaml.in/yaml/v3"
)
