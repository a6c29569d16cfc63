// A workload for the real node's checks: it answers every HTTP request on
// ECHO_ADDR (:8080) with its Pod's name and the path asked, logs each request
// to stdout (kubectl logs), and with ECHO_KUBERNETES set asks the API
// server's /version through the `kubernetes` Service with its
// ServiceAccount's token, logging the answer's status when it changes.
// `echo get URL` is its client (what `kubectl exec` runs in a Pod): it prints
// the answer's body, and fails on anything but 200.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"
)

const account = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	log.SetFlags(0)
	if len(os.Args) == 3 && os.Args[1] == "get" {
		get(os.Args[2])
		return
	}
	name, _ := os.Hostname()
	addr := os.Getenv("ECHO_ADDR")
	if addr == "" {
		addr = ":8080"
	}
	if os.Getenv("ECHO_KUBERNETES") != "" {
		go askKubernetes()
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("request %s from %s", r.URL.Path, r.RemoteAddr)
		fmt.Fprintf(w, "%s %s\n", name, r.URL.Path)
	})
	log.Printf("echo %s listening on %s", name, addr)
	log.Fatal(http.ListenAndServe(addr, nil))
}

// get prints the body of `GET url`.
func get(url string) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		log.Fatalf("GET %s: %s", url, resp.Status)
	}
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		log.Fatal(err)
	}
}

// askKubernetes asks the API server's /version every second, through the
// Service the kubelet names in KUBERNETES_SERVICE_HOST and _PORT.
func askKubernetes() {
	last := ""
	for {
		said := ""
		status, err := version()
		if err != nil {
			said = fmt.Sprintf("kubernetes: %v", err)
		} else {
			said = fmt.Sprintf("kubernetes: %s", status)
		}
		if said != last {
			log.Print(said)
			last = said
		}
		time.Sleep(time.Second)
	}
}

func version() (string, error) {
	ca, err := os.ReadFile(account + "ca.crt")
	if err != nil {
		return "", err
	}
	token, err := os.ReadFile(account + "token")
	if err != nil {
		return "", err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}},
	}
	url := fmt.Sprintf("https://%s:%s/version", os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+string(token))
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	return resp.Status, nil
}
