package pgstore

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// releasedMigrations are the SHA-256 sums of the migrations deployed
// databases may have run (versions 1 to 12), as they were applied: a
// migration built from another's text (mustReplace, replaceSpans) must
// stay byte for byte what it was, or a fresh schema would differ from an
// upgraded one.
var releasedMigrations = []string{
	"7fbbaadffef4b3063aa2b255e46fe2bab5f9857bc6220dd3aac7ed007338c559",
	"ef3724f2e62adb8be3dd6407e066fb174703e77b908c64a97f6cdbd03c4eac32",
	"166dd06272e15c60bc4f70395d77b28e7b4f7986cc84962f93af4433886fb6b4",
	"0f129d260e9e80a643a601bab2ac555be693337eb5afd3c48ccccf87bc23fd9a",
	"6e5d5edbe3e394090ca957cb1b3b72d8b3a7c886e265942ea2807a4166bef0f6",
	"e978657f3e1501ff794f0eaf29a3703ca6aca0c9cd90ec144e0d78306b60d54e",
	"1cd213006fe5e663f531f35a9a7ec40aa22f1b743826213fb7610a45ea7c9923",
	"1eea7421d41d3f60c8739bdebda819d3cb4bcbdc4b1717299fb3e4fc16b0e727",
	"6b6a90c61d16ef5767c57355ddd1473f31526ba6d144bfbacd29623ad82a5cce",
	"4448fcdf08d0ca32327a436fec56f80938d9725665adf5c6cfac4ef9ba06f3d3",
	"58a070d1bc94d002c4de4a4ae25e9970cd3da38a5d379d1c284b2aea2020d2ce",
	"ac7bf2844cc32480f895f1790b452800f6c32f13abe81e4f5dd7c194ca798738",
}

func TestReleasedMigrationsAreUnchanged(t *testing.T) {
	for i, want := range releasedMigrations {
		sum := sha256.Sum256([]byte(migrations[i]))
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("migration to version %d changed (sha256 %s, released %s): append a migration instead", i+1, got, want)
		}
	}
}
