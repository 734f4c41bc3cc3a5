package beamsparkrunner.ui;

import org.apache.spark.SparkContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.ui.SparkUI;
import org.apache.spark.ui.SparkUITab;
import scala.Option;

/**
 * The "Beam" tab of a running application's Spark UI: a streaming
 * pipeline's stateful steps with their watermarks, as the runner's driver
 * last reported them (one table, replaced after every micro-batch).
 *
 * <p>The driver calls {@link #show} with the table as text; the page
 * ({@link WatermarksPage}) renders whatever was shown last. One tab per
 * SparkContext, added on the first {@code show}.
 */
public final class BeamTab extends SparkUITab {
  private static BeamTab installed;
  private static SparkContext installedFor;

  private volatile Table table = Table.EMPTY;

  private BeamTab(SparkUI ui) {
    super(ui, "beam");
    attachPage(new WatermarksPage(this));
  }

  /** What the page shows: a caption, column names and rows of cells, all text. */
  static final class Table {
    static final Table EMPTY = new Table("No streaming pipeline has reported watermarks yet.", new String[0], new String[0][]);

    final String caption;
    final String[] columns;
    final String[][] rows;

    Table(String caption, String[] columns, String[][] rows) {
      this.caption = caption;
      this.columns = columns;
      this.rows = rows;
    }
  }

  Table table() {
    return table;
  }

  /**
   * Replaces the table the tab shows, adding the tab to {@code jsc}'s UI
   * first if needed.
   *
   * @param cells the rows' cells, row after row, {@code columns.length} per row
   * @return false when the application runs without a UI ({@code spark.ui.enabled=false})
   */
  public static synchronized boolean show(JavaSparkContext jsc, String caption, String[] columns, String[] cells) {
    if (columns.length == 0 || cells.length % columns.length != 0) {
      throw new IllegalArgumentException(
          "BeamTab.show: " + cells.length + " cells do not make rows of " + columns.length + " columns");
    }
    SparkContext sc = jsc.sc();
    if (installed == null || installedFor != sc) {
      Option<SparkUI> ui = sc.ui();
      if (ui.isEmpty()) {
        return false;
      }
      installed = new BeamTab(ui.get());
      installedFor = sc;
      ui.get().attachTab(installed);
    }
    String[][] rows = new String[cells.length / columns.length][];
    for (int r = 0; r < rows.length; r++) {
      rows[r] = new String[columns.length];
      System.arraycopy(cells, r * columns.length, rows[r], 0, columns.length);
    }
    installed.table = new Table(caption, columns.clone(), rows);
    return true;
  }
}
