package mysql

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/leaf-go/leaf/internal/doctest"
)

var mysqlCodeRe = regexp.MustCompile(`\b\d{4}\b`)

// TestRetryCodesDocumented: docs/scaling.md lists every error number the
// store re-runs, under the leaf_store_retries_total cause it counts as, and
// no other, and the retry bound; docs/contract.md §8 rule 1 names them too.
func TestRetryCodesDocumented(t *testing.T) {
	scaling := doctest.Paragraph(t, "../..", "docs/scaling.md", "A transaction the engine refuses")
	_, causes, ok := strings.Cut(scaling, "`leaf_store_retries_total{cause}`:")
	if !ok {
		t.Fatal("docs/scaling.md: the retry paragraph no longer lists the causes of leaf_store_retries_total{cause}")
	}
	listed, _, _ := strings.Cut(scaling, "The stores count")
	rule := doctest.Paragraph(t, "../..", "docs/contract.md", "1. **Retry what the engine asks to retry.**")
	doc := map[string]string{} // error number → cause
	for _, m := range regexp.MustCompile("`([a-z_]+)` \\(([^)]*)\\)").FindAllStringSubmatch(causes, -1) {
		for _, code := range mysqlCodeRe.FindAllString(m[2], -1) {
			doc[code] = m[1]
		}
	}
	for i, c := range retryCodes {
		code := strconv.Itoa(int(c))
		if doc[code] != retryCauseNames[i] {
			t.Errorf("docs/scaling.md: leaf_store_retries_total counts %s as %q; the store counts it as %q", code, doc[code], retryCauseNames[i])
		}
		delete(doc, code)
		named := regexp.MustCompile(`\b` + code + `\b`)
		if !named.MatchString(listed) {
			t.Errorf("docs/scaling.md: the retry paragraph does not say that %s is re-run", code)
		}
		if !named.MatchString(rule) {
			t.Errorf("docs/contract.md §8 rule 1 does not say that %s is re-run", code)
		}
	}
	for code, cause := range doc {
		t.Errorf("docs/scaling.md: %s under %q, but the MySQL store does not re-run it", code, cause)
	}
	bound := strconv.Itoa(int(maxConflictWait.Seconds()))
	if !strings.Contains(listed, "for at most "+bound+" s") {
		t.Errorf("docs/scaling.md: the retry paragraph does not give the bound maxConflictWait = %v", maxConflictWait)
	}
	if !strings.Contains(rule, "and "+bound+" s") {
		t.Errorf("docs/contract.md §8 rule 1 does not give the bound maxConflictWait = %v", maxConflictWait)
	}
}
