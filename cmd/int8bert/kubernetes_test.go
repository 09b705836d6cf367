package main

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// k8sDoc is what the test reads of docker/kubernetes.yaml's documents.
type k8sDoc struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []k8sContainer `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sContainer struct {
	Args  []string `yaml:"args"`
	Ports []struct {
		ContainerPort int `yaml:"containerPort"`
	} `yaml:"ports"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	Readiness *k8sProbe `yaml:"readinessProbe"`
	Liveness  *k8sProbe `yaml:"livenessProbe"`
}

type k8sProbe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port int    `yaml:"port"`
	} `yaml:"httpGet"`
}

// checkManifest returns what is wrong with a manifest against serve's flags.
func checkManifest(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var problems []string
	kinds := map[string]bool{}
	var c *k8sContainer
	for {
		var d k8sDoc
		if err := dec.Decode(&d); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		kinds[d.Kind] = true
		if d.Kind == "Deployment" && len(d.Spec.Template.Spec.Containers) > 0 {
			c = &d.Spec.Template.Spec.Containers[0]
		}
	}
	for _, k := range []string{"Deployment", "Service", "HorizontalPodAutoscaler"} {
		if !kinds[k] {
			problems = append(problems, "no "+k)
		}
	}
	if c == nil {
		return errors.New(strings.Join(append(problems, "no Deployment container"), "; "))
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		return errors.New("args do not start with serve")
	}
	// Every --flag must be one of serve's; parse the args with its flag set.
	fs := serveFlagSet()
	fs.SetOutput(io.Discard)
	for _, a := range c.Args[1:] {
		if name, ok := flagName(a); ok && fs.Lookup(name) == nil {
			problems = append(problems, "serve has no flag "+a)
		}
	}
	if err := fs.Parse(c.Args[1:]); err != nil {
		problems = append(problems, "serve's flags refuse the args: "+err.Error())
	}
	addrPort := 8080 // serve's default --addr ":8080"
	if f := fs.Lookup("addr"); f != nil {
		_, p, err := net.SplitHostPort(f.Value.String())
		if n, err2 := strconv.Atoi(p); err != nil || err2 != nil {
			problems = append(problems, "bad --addr "+f.Value.String())
		} else {
			addrPort = n
		}
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != addrPort {
		problems = append(problems, "containerPort is not the --addr port "+strconv.Itoa(addrPort))
	}
	for name, p := range map[string]*k8sProbe{"readiness": c.Readiness, "liveness": c.Liveness} {
		switch {
		case p == nil:
			problems = append(problems, "no "+name+"Probe")
		case p.HTTPGet.Path != "/health":
			problems = append(problems, name+" probe path "+p.HTTPGet.Path+", want /health")
		case p.HTTPGet.Port != addrPort:
			problems = append(problems, name+" probe port "+strconv.Itoa(p.HTTPGet.Port)+" is not the --addr port "+strconv.Itoa(addrPort))
		}
	}
	intFlag := func(name string) int {
		f := fs.Lookup(name)
		if f == nil {
			return 0
		}
		n, _ := strconv.Atoi(f.Value.String())
		return n
	}
	inst, tpi := intFlag("instances"), intFlag("threads-per-instance")
	if inst < 1 || tpi < 1 {
		problems = append(problems, "args must set --instances and --threads-per-instance (the CPU request depends on them)")
	}
	want := strconv.Itoa(inst * tpi)
	if got := c.Resources.Requests["cpu"]; got != want {
		problems = append(problems, "cpu request "+got+", want instances x threads-per-instance = "+want)
	}
	if got := c.Resources.Limits["cpu"]; got != want {
		problems = append(problems, "cpu limit "+got+", want "+want)
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func TestKubernetesManifest(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docker", "kubernetes.yaml"))
	require.NoError(t, err)
	require.NoError(t, checkManifest(data))
}

// TestKubernetesManifestCatches edits copies of the manifest: each wrong
// flag, port or CPU request must fail the check.
func TestKubernetesManifestCatches(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docker", "kubernetes.yaml"))
	require.NoError(t, err)
	s := string(data)
	for name, edit := range map[string][2]string{
		"unknown flag":   {"- --pin\n", "- --pinn\n"},
		"addr port":      {"- :8080\n", "- :9090\n"},
		"probe path":     {"path: /health, port: 8080}\n            periodSeconds: 5", "path: /healthz, port: 8080}\n            periodSeconds: 5"},
		"probe port":     {"port: 8080}\n            initialDelaySeconds: 60", "port: 8081}\n            initialDelaySeconds: 60"},
		"cpu request":    {`requests: {cpu: "2"`, `requests: {cpu: "3"`},
		"container port": {"containerPort: 8080", "containerPort: 8081"},
	} {
		require.Contains(t, s, edit[0], name)
		require.Error(t, checkManifest([]byte(strings.Replace(s, edit[0], edit[1], 1))), name)
	}
}
