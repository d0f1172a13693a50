// Package mavenlibs keeps the jars of a pom.xml in the repository — fetched
// with Maven into a cache outside the repository — and compiles Java
// sources against them. The Apache Kafka broker of the tests
// (internal/kafkabroker) and the Flink comparator of 'weir bench'
// (internal/flinkbench) are two such sets.
package mavenlibs

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Libs is one set of jars.
type Libs struct {
	// Name and Version name the cache directory: weir/<Name>-<Version>.
	Name, Version string
	// Env is the variable that overrides the jars' directory.
	Env string
	// Pom is the pom.xml whose dependencies are the set, from the
	// repository's root; its packaging is pom (nothing is built).
	Pom string
	// Marker is a jar whose presence in Dir says the fetch ran.
	Marker string
	// Fetcher is the command that fetches the set, for error messages.
	Fetcher string
}

// Dir is the directory holding the jars: $Env, or
// weir/<Name>-<Version>/libs under the user's cache directory.
func (l Libs) Dir() string {
	if d := os.Getenv(l.Env); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "weir", l.Name+"-"+l.Version, "libs")
}

// Fetched reports whether Dir holds the marker jar.
func (l Libs) Fetched() bool {
	_, err := os.Stat(filepath.Join(l.Dir(), l.Marker))
	return err == nil
}

// Available reports why the set cannot be used here (no JDK on the PATH,
// the jars not fetched), or nil.
func (l Libs) Available() error {
	var missing []string
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (a JDK 17 or later)")
		}
	}
	if !l.Fetched() {
		missing = append(missing, fmt.Sprintf("the %s %s jars in %s (fetch them with: %s)", l.Name, l.Version, l.Dir(), l.Fetcher))
	}
	if len(missing) > 0 {
		return fmt.Errorf("needs %s", strings.Join(missing, " and "))
	}
	return nil
}

// Fetch runs Maven (mvn dependency:copy-dependencies of Pom, from the
// repository's root) unless the jars are there, and returns Dir. Maven's
// own output goes to stderr.
func (l Libs) Fetch() (string, error) {
	dir := l.Dir()
	if l.Fetched() {
		return dir, nil
	}
	if _, err := os.Stat(l.Pom); err != nil {
		return "", fmt.Errorf("%w (run from the repository's root)", err)
	}
	cmd := exec.Command("mvn", "-q", "-B", "-f", l.Pom, "dependency:copy-dependencies", "-DoutputDirectory="+dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mvn: %w", err)
	}
	if !l.Fetched() {
		return "", fmt.Errorf("mvn ran, but %s has no %s", dir, l.Marker)
	}
	return dir, nil
}

// FetchMain is the main function of a fetch command: it fetches the set
// and prints Dir, or prints the error and exits with status 1.
func (l Libs) FetchMain(prog string) {
	dir, err := l.Fetch()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		os.Exit(1)
	}
	fmt.Println(dir)
}

// Classpath is the set's jars followed by dirs.
func (l Libs) Classpath(dirs ...string) string {
	cp := filepath.Join(l.Dir(), "*")
	for _, d := range dirs {
		cp += string(os.PathListSeparator) + d
	}
	return cp
}

var (
	compileMu sync.Mutex
	compiled  = map[string]bool{} // class directories known to be complete
)

// Compile compiles the Java source src of class (its file is
// <class>.java) against the set's jars and returns the directory holding
// the classes. The directory is beside Dir, named by the hash of the
// source and the set's version, so a source is compiled once per machine;
// concurrent compilers race harmlessly to rename theirs into place.
func (l Libs) Compile(class string, src []byte) (string, error) {
	compileMu.Lock()
	defer compileMu.Unlock()
	sum := sha256.Sum256(append(append([]byte(l.Name+"-"+l.Version+"\x00"), class+"\x00"...), src...))
	dir := filepath.Join(filepath.Dir(l.Dir()), "classes-"+class+"-"+hex.EncodeToString(sum[:6]))
	if compiled[dir] {
		return dir, nil
	}
	classFile := filepath.Join(dir, class+".class")
	if _, err := os.Stat(classFile); err == nil {
		compiled[dir] = true
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Dir(l.Dir()), "classes-build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, class+".java")
	if err := os.WriteFile(file, src, 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command("javac", "-nowarn", "-cp", l.Classpath(), "-d", tmp, file).CombinedOutput(); err != nil {
		return "", fmt.Errorf("javac %s.java: %w: %s", class, err, out)
	}
	os.Remove(file)
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(classFile); serr != nil {
			return "", err
		}
	}
	compiled[dir] = true
	return dir, nil
}
