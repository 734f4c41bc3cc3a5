package beamsparkrunner.xlang;

import java.util.Collections;
import java.util.Map;
import org.apache.beam.sdk.expansion.ExternalTransformRegistrar;
import org.apache.beam.sdk.extensions.sql.SqlTransform;
import org.apache.beam.sdk.transforms.ExternalTransformBuilder;
import org.apache.beam.sdk.transforms.PTransform;
import org.apache.beam.sdk.values.PCollection;
import org.apache.beam.sdk.values.PInput;
import org.apache.beam.sdk.values.Row;

/**
 * Expands Python's {@code apache_beam.transforms.sql.SqlTransform} (URN
 * {@code beam:external:java:sql:v1}) into Beam SQL's {@link SqlTransform}, in
 * the runner's SQL expansion service. Found by the expansion service through
 * {@link java.util.ServiceLoader} (META-INF/services); registers nothing where
 * Beam SQL is not on the classpath (the runner's other expansion services).
 *
 * <p>The Python transform's configuration fields: {@code query}, and the
 * optional {@code dialect} (Calcite's is the only one Beam SQL has: any other
 * is refused, naming it) and {@code ddl} (statements run before the query,
 * e.g. CREATE FUNCTION).
 */
public final class SqlTransforms implements ExternalTransformRegistrar {
  public static final String URN = "beam:external:java:sql:v1";

  /** Registers nothing on an expansion service without Beam SQL's jars. */
  @Override
  public Map<String, ExternalTransformBuilder<?, ?, ?>> knownBuilderInstances() {
    try {
      Class.forName("org.apache.beam.sdk.extensions.sql.SqlTransform", false, getClass().getClassLoader());
    } catch (ClassNotFoundException e) {
      return Collections.emptyMap();
    }
    return Collections.singletonMap(URN, new Builder());
  }

  /** The configuration Python sends, populated through its setters. */
  public static final class Configuration {
    private String query = "";
    private String dialect;
    private String ddl;

    public void setQuery(String query) {
      this.query = query;
    }

    public void setDialect(String dialect) {
      this.dialect = dialect;
    }

    public void setDdl(String ddl) {
      this.ddl = ddl;
    }
  }

  /** Builds the SqlTransform of one configuration. */
  public static final class Builder
      implements ExternalTransformBuilder<Configuration, PInput, PCollection<Row>> {
    @Override
    public PTransform<PInput, PCollection<Row>> buildExternal(Configuration configuration) {
      if (configuration.query == null || configuration.query.isEmpty()) {
        throw new IllegalArgumentException("SqlTransform: the query is empty");
      }
      String dialect = configuration.dialect;
      if (dialect != null && !dialect.isEmpty() && !dialect.equalsIgnoreCase("calcite")) {
        throw new IllegalArgumentException(
            "SqlTransform: dialect '" + dialect + "' is not supported; Beam SQL's only dialect is 'calcite'");
      }
      SqlTransform transform = SqlTransform.query(configuration.query);
      if (configuration.ddl != null && !configuration.ddl.isEmpty()) {
        transform = transform.withDdlString(configuration.ddl);
      }
      return transform;
    }
  }
}
