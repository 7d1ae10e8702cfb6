// parse-prometheus-text-format ships JavaScript only; this is the shape it documents (prom2json's).
declare module "parse-prometheus-text-format" {
  interface Sample {
    value?: string;
    labels?: Record<string, string>;
    buckets?: Record<string, string>;
    quantiles?: Record<string, string>;
    count?: string;
    sum?: string;
  }
  interface Family {
    name: string;
    help: string;
    type: "COUNTER" | "GAUGE" | "HISTOGRAM" | "SUMMARY" | "UNTYPED";
    metrics: Sample[];
  }
  function parsePrometheusTextFormat(text: string): Family[];
  export = parsePrometheusTextFormat;
}
