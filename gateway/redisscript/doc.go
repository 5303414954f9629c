// Package redisscript runs the gateway's Redis Lua scripts: one way to load
// a package's embedded lua/*.lua, with the pieces several scripts share
// written once in lua/include/ and taken in by `--#include <name>` lines
// ([MustLoad]), one way to send scripts in a
// pipeline by EVALSHA with the NOSCRIPT fallback go-redis's Script.Run
// cannot give inside a pipeline ([Run]), and one check that a script's
// header names every KEYS and ARGV entry in the order its Go argument
// struct sends them ([CheckHeader]).
//
// It imports nothing of the gateway, so the idempotency store
// (redisstore) and the rate limiter (ratelimit) both use it.
package redisscript
