"""The report's sections, one module each, every one with ``build(ctx) -> Section | None``.
(:class:`~trace_report.present.report.context.ReportContext`; None where the section does not
apply). :data:`trace_report.present.report.page.SECTIONS` gives their order on the page."""
