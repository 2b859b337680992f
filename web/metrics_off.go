//go:build shadowgate_omit_metrics

package web

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/shadowgate/shadowgate/internal/omit"
	"github.com/shadowgate/shadowgate/runtime"
)

// Metrics count nothing in a build without metrics: /metrics answers 404.
// Its methods do nothing and are safe on a nil Metrics.
type Metrics struct{}

// NewMetrics returns Metrics that count nothing.
func NewMetrics() *Metrics { return &Metrics{} }

// ObserveStep does nothing.
func (m *Metrics) ObserveStep(runtime.ObservationKind, time.Duration) {}

// ObserveCommit does nothing.
func (m *Metrics) ObserveCommit(time.Duration, int) {}

func (m *Metrics) sentEvent() {}

func (m *Metrics) watch(*runtime.Engine, func() MQTTStats, func() UplinkStats, func() time.Time) {}

// metrics answers 404, saying the build has no metrics.
func (s *Server) metrics(echo.Context) error {
	return problem(http.StatusNotFound, omit.MetricsPart.Refusal())
}
