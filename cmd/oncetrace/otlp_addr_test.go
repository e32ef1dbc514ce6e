package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeOTLPAddr: with --otlp-addr, serve also accepts OTLP/HTTP traces
// on a second port, which serves /v1/traces and nothing else.
func TestServeOTLPAddr(t *testing.T) {
	otlpAddr := fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(t))
	s := startDemoServer(t, filepath.Join(t.TempDir(), "otlp.db"), "otlp.log", "--otlp-addr", otlpAddr)
	body := `{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b175",
		"name":"execute_tool send_invoice_email","startTimeUnixNano":"1751292131200000000","endTimeUnixNano":"1751292131300000000",
		"attributes":[{"key":"oncetrace.step.id","value":{"stringValue":"call_1"}}]}]}]}]}`
	resp, err := demoHTTP.Post("http://"+otlpAddr+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST /v1/traces on --otlp-addr: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /v1/traces on --otlp-addr: got %d, want 200", resp.StatusCode)
	}
	var got struct {
		Steps []struct {
			StepID string `json:"step_id"`
		} `json:"steps"`
	}
	getJSON(t, s.url+"/api/v1/executions/5b8efff798038103d269b633813fc60c", &got)
	if len(got.Steps) != 1 || got.Steps[0].StepID != "call_1" {
		t.Errorf("execution from the OTLP port: got steps %+v, want one step call_1", got.Steps)
	}
	// Logs go to the same port and are accepted and dropped.
	resp, err = demoHTTP.Post("http://"+otlpAddr+"/v1/logs", "application/json", strings.NewReader(`{"resourceLogs":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("POST /v1/logs on --otlp-addr: got %d, want 200", resp.StatusCode)
	}
	resp, err = demoHTTP.Get("http://" + otlpAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET / on the OTLP port: got %d, want 404", resp.StatusCode)
	}
	s.stop(t)
}
