// Package chdbtest runs the ClickHouse sinks on ClickHouse 26.7 in process
// (chDB: npm @chdb/lib-linux-x64-gnu 26.7.3-stable.1 through
// github.com/chdb-io/chdb-go v1.11.0), to test what the Debian 18.16
// server cannot: insert_deduplication_token and
// non_replicated_deduplication_window. chDB has no HTTP server, so its
// transport runs the sink's own requests (Request.InlineSQL: the same
// statement, settings and rows the HTTP transport sends).
//
// The tests need the build tag chdb and CHDB_LIB_PATH naming libchdb.so
// (chdb-go loads it when the test binary starts); .ci/run installs the
// library outside the repository and runs them. chDB keeps one data
// directory per process, which is why they live in their own package.
package chdbtest
